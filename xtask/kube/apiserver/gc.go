package main

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
)

// The garbage collector and the namespace deleter: a small stand-in for kube-controller-manager's
// controllers of the same names, run in this process. Every tick it lists the metadata of every
// object of every resource (built-in and CRDs), then:
//   - deletes objects all of whose owners are gone (background deletion), and drops the
//     ownerReferences of owners that are gone when others remain;
//   - for an owner deleted with propagationPolicy Foreground (finalizer foregroundDeletion),
//     deletes its dependents (foreground too) and drops the finalizer once none is left;
//   - for an owner deleted with propagationPolicy Orphan (finalizer orphan), drops the
//     dependents' ownerReferences to it, then the finalizer;
//   - force-deletes terminating pods bound to a node that does not exist;
//   - for a namespace being deleted, deletes everything in it, and when nothing is left drops
//     its `kubernetes` finalizer, which removes it.
// It lists rather than watches: simple, and quick enough for a test ground's few objects.

const gcInterval = 500 * time.Millisecond

type gcObject struct {
	gvr  schema.GroupVersionResource
	meta metav1.PartialObjectMetadata
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
		gc := &garbageCollector{client: client, discovery: disco, pods: typed.CoreV1(), finalizeNamespace: finalizeNamespace}
		go wait.UntilWithContext(hook, gc.tick, gcInterval)
		return nil
	}
}

func (gc *garbageCollector) resources() []schema.GroupVersionResource {
	lists, err := gc.discovery.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		klog.V(2).InfoS("garbage collector: discovery failed", "err", err)
		return nil
	}
	var out []schema.GroupVersionResource
	namespaced := map[schema.GroupVersionResource]bool{}
	gc.byKind = map[schema.GroupKind]schema.GroupVersionResource{}
	gc.namespaced = namespaced
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerbs(r.Verbs, "list", "delete") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			out = append(out, gvr)
			namespaced[gvr] = r.Namespaced
			gc.byKind[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] = gvr
		}
	}
	return out
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

func (gc *garbageCollector) tick(ctx context.Context) {
	resources := gc.resources()
	byUID := map[types.UID]*gcObject{}
	var all []*gcObject
	for _, gvr := range resources {
		list, err := gc.client.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range list.Items {
			o := &gcObject{gvr: gvr, meta: list.Items[i]}
			byUID[o.meta.UID] = o
			all = append(all, o)
		}
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
	gc.removeOrphanedPods(ctx, all, nodes)
	for _, o := range all {
		if o.gvr.Group == "" && o.gvr.Resource == "namespaces" && o.meta.DeletionTimestamp != nil {
			gc.emptyNamespace(ctx, o.meta.Name, all)
		}
	}
}

// removeOrphanedPods force-deletes terminating pods bound to a node that does not exist: no
// kubelet will ever finish them (kube-controller-manager's pod GC does the same).
func (gc *garbageCollector) removeOrphanedPods(ctx context.Context, all []*gcObject, nodes map[string]bool) {
	var pods []*gcObject
	for _, o := range all {
		if o.gvr.Group == "" && o.gvr.Resource == "pods" && o.meta.DeletionTimestamp != nil {
			pods = append(pods, o)
		}
	}
	if len(pods) == 0 {
		return
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
		// an owner of a kind not served is gone
		return false
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

func (gc *garbageCollector) emptyNamespace(ctx context.Context, ns string, all []*gcObject) {
	left := 0
	background := metav1.DeletePropagationBackground
	for _, o := range all {
		if !gc.namespaced[o.gvr] || o.meta.Namespace != ns {
			continue
		}
		left++
		if o.meta.DeletionTimestamp == nil {
			gc.delete(ctx, o, &background)
		}
	}
	if left == 0 {
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
