package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// The garbage collector and the namespace deleter: a small stand-in for kube-controller-manager's
// controllers of the same names, run in this process. Like them it works from watches: a
// metadata informer per resource (built-in and CRDs) keeps the objects' metadata in memory, and
// each change (a few at a time) starts a pass over that cache, which
//   - deletes objects all of whose owners are gone (background deletion), and drops the
//     ownerReferences of owners that are gone when others remain;
//   - for an owner deleted with propagationPolicy Foreground (finalizer foregroundDeletion),
//     deletes its dependents (foreground too) and drops the finalizer once none is left;
//   - for an owner deleted with propagationPolicy Orphan (finalizer orphan), drops the
//     dependents' ownerReferences to it, then the finalizer;
//   - force-deletes terminating pods bound to a node that does not exist;
//   - for a namespace being deleted, deletes everything in it, and when a fresh listing finds
//     nothing left drops its `kubernetes` finalizer, which removes it.
// At rest it sends no request: the watches stay open, and the periodic pass reads only memory.
// Discovery runs again when a CRD changes, and the informers follow the resources served.

const (
	// gcSettle batches a burst of changes into one pass.
	gcSettle = 100 * time.Millisecond
	// gcResync is the pass made without a change: memory only, for owners whose deletion was
	// refused (a conflict) and is tried again.
	gcResync = 5 * time.Second
	// gcNamespaceInterval spaces the fresh listings of a namespace being deleted.
	gcNamespaceInterval = 500 * time.Millisecond
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// quietResources change all the time and own nothing: their changes wait for the periodic pass.
var quietResources = map[string]bool{"leases": true, "events": true}

type gcObject struct {
	gvr  schema.GroupVersionResource
	meta metav1.PartialObjectMetadata
}

// watched is one resource's informer and what stops it.
type watched struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

type garbageCollector struct {
	client    metadata.Interface
	discovery discovery.DiscoveryInterface
	pods      corev1client.PodsGetter
	// finalizeNamespace drops the `kubernetes` finalizer of a namespace and removes it
	finalizeNamespace func(ctx context.Context, name string) error
	// resources by group and kind, for reading owners
	byKind     map[schema.GroupKind]schema.GroupVersionResource
	namespaced map[schema.GroupVersionResource]bool
	watches    map[schema.GroupVersionResource]*watched
	// changed is signalled by the informers; rediscover when a CRD changed
	changed    chan struct{}
	rediscover atomic.Bool
	// lastListing is when namespaces being deleted were last listed
	lastListing time.Time
}

func garbageCollectorHook(finalizeNamespace func(ctx context.Context, name string) error) genericapiserver.PostStartHookFunc {
	return func(hook genericapiserver.PostStartHookContext) error {
		client, err := metadata.NewForConfig(hook.LoopbackClientConfig)
		if err != nil {
			return err
		}
		disco, err := discovery.NewDiscoveryClientForConfig(hook.LoopbackClientConfig)
		if err != nil {
			return err
		}
		typed, err := kubernetes.NewForConfig(hook.LoopbackClientConfig)
		if err != nil {
			return err
		}
		gc := &garbageCollector{
			client:            client,
			discovery:         disco,
			pods:              typed.CoreV1(),
			finalizeNamespace: finalizeNamespace,
			watches:           map[schema.GroupVersionResource]*watched{},
			changed:           make(chan struct{}, 1),
		}
		gc.rediscover.Store(true)
		go gc.run(hook)
		return nil
	}
}

func (gc *garbageCollector) run(ctx context.Context) {
	resync := time.NewTicker(gcResync)
	defer resync.Stop()
	for {
		if gc.rediscover.Swap(false) {
			gc.follow(ctx, gc.resources())
		}
		var soon <-chan time.Time
		if gc.tick(ctx) {
			// a namespace is being emptied: look again soon, changes or not
			soon = time.After(gcNamespaceInterval)
		}
		select {
		case <-ctx.Done():
			for _, w := range gc.watches {
				w.stop()
			}
			return
		case <-gc.changed:
		case <-resync.C:
		case <-soon:
		}
		time.Sleep(gcSettle)
	}
}

func (gc *garbageCollector) poke() {
	select {
	case gc.changed <- struct{}{}:
	default:
	}
}

// follow starts an informer for each resource newly served and stops those of resources gone.
func (gc *garbageCollector) follow(ctx context.Context, resources []schema.GroupVersionResource) {
	if resources == nil {
		// discovery failed: keep what is watched, and try again
		gc.rediscover.Store(true)
		return
	}
	served := map[schema.GroupVersionResource]bool{}
	for _, gvr := range resources {
		served[gvr] = true
		if gc.watches[gvr] != nil {
			continue
		}
		informer := metadatainformer.NewFilteredMetadataInformer(gc.client, gvr, "", 0, cache.Indexers{}, nil).Informer()
		quiet := quietResources[gvr.Resource]
		isCRD := gvr == crdResource
		changed := func() {
			if isCRD {
				gc.rediscover.Store(true)
			}
			if !quiet {
				gc.poke()
			}
		}
		_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(interface{}) { changed() },
			UpdateFunc: func(interface{}, interface{}) { changed() },
			DeleteFunc: func(interface{}) { changed() },
		})
		runCtx, stop := context.WithCancel(ctx)
		gc.watches[gvr] = &watched{informer: informer, stop: stop}
		go informer.RunWithContext(runCtx)
	}
	for gvr, w := range gc.watches {
		if !served[gvr] {
			w.stop()
			delete(gc.watches, gvr)
		}
	}
}

// resources lists the served resources the collector works on; nil when discovery failed.
func (gc *garbageCollector) resources() []schema.GroupVersionResource {
	lists, err := gc.discovery.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		klog.V(2).InfoS("garbage collector: discovery failed", "err", err)
		return nil
	}
	out := []schema.GroupVersionResource{}
	namespaced := map[schema.GroupVersionResource]bool{}
	byKind := map[schema.GroupKind]schema.GroupVersionResource{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerbs(r.Verbs, "list", "watch", "delete") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			out = append(out, gvr)
			namespaced[gvr] = r.Namespaced
			byKind[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] = gvr
		}
	}
	gc.byKind = byKind
	gc.namespaced = namespaced
	return out
}

// cached is every object the synced informers hold; a resource whose informer has not synced
// yet is left out (its objects' owners are then read directly, see ownerExists).
func (gc *garbageCollector) cached() []*gcObject {
	var all []*gcObject
	for gvr, w := range gc.watches {
		if !w.informer.HasSynced() {
			continue
		}
		for _, item := range w.informer.GetStore().List() {
			if m, ok := item.(*metav1.PartialObjectMetadata); ok {
				all = append(all, &gcObject{gvr: gvr, meta: *m})
			}
		}
	}
	return all
}

// listed is every object in namespace ns, read fresh from the server: a namespace is finalized
// only when a definite listing finds it empty.
func (gc *garbageCollector) listed(ctx context.Context, ns string) ([]*gcObject, bool) {
	var all []*gcObject
	for gvr := range gc.watches {
		if !gc.namespaced[gvr] {
			continue
		}
		list, err := gc.client.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, false
		}
		for i := range list.Items {
			all = append(all, &gcObject{gvr: gvr, meta: list.Items[i]})
		}
	}
	return all, true
}

func hasVerbs(verbs []string, want ...string) bool {
	have := map[string]bool{}
	for _, v := range verbs {
		have[v] = true
	}
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}

// tick makes one pass; true while a namespace is being deleted.
func (gc *garbageCollector) tick(ctx context.Context) bool {
	all := gc.cached()
	byUID := map[types.UID]*gcObject{}
	for _, o := range all {
		byUID[o.meta.UID] = o
	}
	dependents := map[types.UID][]*gcObject{}
	for _, o := range all {
		for _, ref := range o.meta.OwnerReferences {
			dependents[ref.UID] = append(dependents[ref.UID], o)
		}
	}
	nodes := map[string]bool{}
	for _, o := range all {
		if o.gvr.Group == "" && o.gvr.Resource == "nodes" {
			nodes[o.meta.Name] = true
		}
	}
	for _, o := range all {
		if o.meta.DeletionTimestamp != nil {
			gc.finishDeletion(ctx, o, dependents[o.meta.UID])
		} else if len(o.meta.OwnerReferences) > 0 {
			gc.collectOrphan(ctx, o, byUID)
		}
	}
	deleting := false
	listNow := time.Since(gc.lastListing) >= gcNamespaceInterval
	if listNow && gc.removeOrphanedPods(ctx, all, nodes) {
		gc.lastListing = time.Now()
	}
	for _, o := range all {
		if o.gvr.Group == "" && o.gvr.Resource == "namespaces" && o.meta.DeletionTimestamp != nil {
			deleting = true
			if listNow {
				gc.lastListing = time.Now()
				gc.emptyNamespace(ctx, o.meta.Name)
			}
		}
	}
	return deleting
}

// removeOrphanedPods force-deletes terminating pods bound to a node that does not exist: no
// kubelet will ever finish them (kube-controller-manager's pod GC does the same). True when it
// read pods from the server (the cache has their metadata only).
func (gc *garbageCollector) removeOrphanedPods(ctx context.Context, all []*gcObject, nodes map[string]bool) bool {
	var pods []*gcObject
	for _, o := range all {
		if o.gvr.Group == "" && o.gvr.Resource == "pods" && o.meta.DeletionTimestamp != nil {
			pods = append(pods, o)
		}
	}
	if len(pods) == 0 {
		return false
	}
	for _, o := range pods {
		pod, err := gc.pods.Pods(o.meta.Namespace).Get(ctx, o.meta.Name, metav1.GetOptions{})
		if err != nil || pod.Spec.NodeName == "" || nodes[pod.Spec.NodeName] {
			continue
		}
		uid := pod.UID
		err = gc.pods.Pods(o.meta.Namespace).Delete(ctx, o.meta.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr(int64(0)),
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			klog.InfoS("garbage collector: removing orphaned pod", "namespace", o.meta.Namespace, "name", o.meta.Name, "err", err)
		}
	}
	return true
}

func (gc *garbageCollector) finishDeletion(ctx context.Context, o *gcObject, deps []*gcObject) {
	switch {
	case hasFinalizer(o, metav1.FinalizerOrphanDependents):
		for _, d := range deps {
			gc.setOwners(ctx, d, withoutOwner(d, o.meta.UID))
		}
		gc.dropFinalizer(ctx, o, metav1.FinalizerOrphanDependents)
	case hasFinalizer(o, metav1.FinalizerDeleteDependents):
		if len(deps) == 0 {
			gc.dropFinalizer(ctx, o, metav1.FinalizerDeleteDependents)
			return
		}
		foreground := metav1.DeletePropagationForeground
		for _, d := range deps {
			if d.meta.DeletionTimestamp == nil {
				gc.delete(ctx, d, &foreground)
			}
		}
	}
}

// collectOrphan deletes o when all its owners are gone, or forgets the owners that are gone.
func (gc *garbageCollector) collectOrphan(ctx context.Context, o *gcObject, byUID map[types.UID]*gcObject) {
	var alive []metav1.OwnerReference
	for _, ref := range o.meta.OwnerReferences {
		if byUID[ref.UID] != nil || gc.ownerExists(ctx, o, ref) {
			alive = append(alive, ref)
		}
	}
	switch {
	case len(alive) == 0:
		background := metav1.DeletePropagationBackground
		gc.delete(ctx, o, &background)
	case len(alive) < len(o.meta.OwnerReferences):
		gc.setOwners(ctx, o, alive)
	}
}

// ownerExists reads the owner itself: the listing is not one snapshot, so an owner created
// after its kind was listed would look gone.
func (gc *garbageCollector) ownerExists(ctx context.Context, o *gcObject, ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	gvr, ok := gc.byKind[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
	if !ok {
		// A kind discovery did not list when last asked, which may be a CRD created since
		// (discovery lags its Established condition): no definite answer, so the owner is kept
		// and discovery asked again, as Kubernetes' collector retries an unmapped owner. Taken
		// for gone, a Token's Secret was deleted and re-created by the operator thousands of times.
		gc.rediscover.Store(true)
		return true
	}
	namespace := ""
	if gc.namespaced[gvr] {
		namespace = o.meta.Namespace
	}
	owner, err := gc.client.Resource(gvr).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		// only a definite answer makes an owner gone
		return !apierrors.IsNotFound(err)
	}
	return owner.UID == ref.UID
}

func (gc *garbageCollector) emptyNamespace(ctx context.Context, ns string) {
	left, ok := gc.listed(ctx, ns)
	if !ok {
		return
	}
	background := metav1.DeletePropagationBackground
	for _, o := range left {
		if o.meta.DeletionTimestamp == nil {
			gc.delete(ctx, o, &background)
		}
	}
	if len(left) == 0 {
		if err := gc.finalizeNamespace(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			klog.InfoS("garbage collector: finalizing namespace", "namespace", ns, "err", err)
		}
	}
}

func (gc *garbageCollector) delete(ctx context.Context, o *gcObject, policy *metav1.DeletionPropagation) {
	uid := o.meta.UID
	err := gc.client.Resource(o.gvr).Namespace(o.meta.Namespace).Delete(ctx, o.meta.Name, metav1.DeleteOptions{
		PropagationPolicy: policy,
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.InfoS("garbage collector: deleting", "resource", o.gvr, "namespace", o.meta.Namespace, "name", o.meta.Name, "err", err)
	}
}

func (gc *garbageCollector) patch(ctx context.Context, o *gcObject, metaPatch map[string]interface{}) {
	metaPatch["uid"] = o.meta.UID
	metaPatch["resourceVersion"] = o.meta.ResourceVersion
	body, err := json.Marshal(map[string]interface{}{"metadata": metaPatch})
	if err != nil {
		return
	}
	_, err = gc.client.Resource(o.gvr).Namespace(o.meta.Namespace).Patch(ctx, o.meta.Name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.InfoS("garbage collector: patching", "resource", o.gvr, "namespace", o.meta.Namespace, "name", o.meta.Name, "err", err)
	}
}

func (gc *garbageCollector) setOwners(ctx context.Context, o *gcObject, owners []metav1.OwnerReference) {
	if owners == nil {
		owners = []metav1.OwnerReference{}
	}
	gc.patch(ctx, o, map[string]interface{}{"ownerReferences": owners})
}

func (gc *garbageCollector) dropFinalizer(ctx context.Context, o *gcObject, finalizer string) {
	kept := []string{}
	for _, f := range o.meta.Finalizers {
		if f != finalizer {
			kept = append(kept, f)
		}
	}
	gc.patch(ctx, o, map[string]interface{}{"finalizers": kept})
}

func hasFinalizer(o *gcObject, finalizer string) bool {
	for _, f := range o.meta.Finalizers {
		if f == finalizer {
			return true
		}
	}
	return false
}

func withoutOwner(o *gcObject, uid types.UID) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, ref := range o.meta.OwnerReferences {
		if ref.UID != uid {
			out = append(out, ref)
		}
	}
	return out
}
