package main

import (
	"context"
	"fmt"
	"math/big"
	"net"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
)

// clusterIPs allocates Service ClusterIPs from --service-cluster-ip-range. The first address
// (10.96.0.1 by default) is kept for default/kubernetes. The stored Services are the allocation
// table; addresses handed out but not yet stored are remembered so that concurrent creates differ.
type clusterIPs struct {
	network *net.IPNet
	store   *genericregistry.Store // the services store, set once built
	mu      sync.Mutex
	pending map[string]bool
}

func newClusterIPs(cidr string) (*clusterIPs, error) {
	_, network, err := net.ParseCIDR(cidr)
	if err != nil || network.IP.To4() == nil {
		return nil, fmt.Errorf("--service-cluster-ip-range %q is not an IPv4 CIDR", cidr)
	}
	return &clusterIPs{network: network, pending: map[string]bool{}}, nil
}

func (a *clusterIPs) nth(n int64) net.IP {
	base := new(big.Int).SetBytes(a.network.IP.To4())
	ip := new(big.Int).Add(base, big.NewInt(n)).Bytes()
	return net.IP(append(make([]byte, 4-len(ip)), ip...))
}

func (a *clusterIPs) size() int64 {
	ones, bits := a.network.Mask.Size()
	return int64(1) << (bits - ones)
}

// kubernetesIP is the ClusterIP of default/kubernetes.
func (a *clusterIPs) kubernetesIP() string { return a.nth(1).String() }

func (a *clusterIPs) used() map[string]bool {
	used := map[string]bool{}
	for ip := range a.pending {
		used[ip] = true
	}
	if a.store == nil {
		return used
	}
	ctx := genericapirequest.WithNamespace(context.Background(), metav1NamespaceAll)
	list, err := a.store.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return used
	}
	for _, svc := range list.(*corev1.ServiceList).Items {
		for _, ip := range svc.Spec.ClusterIPs {
			used[ip] = true
		}
		used[svc.Spec.ClusterIP] = true
	}
	return used
}

const metav1NamespaceAll = ""

func wantsClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

func (a *clusterIPs) prepareCreate(_ context.Context, obj runtime.Object) {
	svc := obj.(*corev1.Service)
	svc.Status = corev1.ServiceStatus{}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		svc.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
	}
	if !wantsClusterIP(svc) {
		return
	}
	if svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) > 0 {
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	}
	if svc.Spec.ClusterIP == "" {
		a.mu.Lock()
		used := a.used()
		for n := int64(2); n < a.size()-1; n++ {
			if ip := a.nth(n).String(); !used[ip] {
				svc.Spec.ClusterIP = ip
				a.pending[ip] = true
				break
			}
		}
		a.mu.Unlock()
	}
	svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	single := corev1.IPFamilyPolicySingleStack
	svc.Spec.IPFamilyPolicy = &single
}

func (a *clusterIPs) prepareUpdate(_ context.Context, obj, old runtime.Object) {
	svc, prev := obj.(*corev1.Service), old.(*corev1.Service)
	// the ClusterIP is immutable: an update that leaves it out keeps the allocated one
	if wantsClusterIP(svc) && svc.Spec.ClusterIP == "" {
		svc.Spec.ClusterIP = prev.Spec.ClusterIP
		svc.Spec.ClusterIPs = prev.Spec.ClusterIPs
		svc.Spec.IPFamilies = prev.Spec.IPFamilies
		svc.Spec.IPFamilyPolicy = prev.Spec.IPFamilyPolicy
	}
}

// validate rejects a requested ClusterIP outside the range or already in use, and a full range.
func (a *clusterIPs) validate(_ context.Context, obj runtime.Object) field.ErrorList {
	svc := obj.(*corev1.Service)
	path := field.NewPath("spec", "clusterIPs").Index(0)
	if !wantsClusterIP(svc) {
		return nil
	}
	if svc.Spec.ClusterIP == "" {
		return field.ErrorList{field.InternalError(path, fmt.Errorf("no free ClusterIP in %s", a.network))}
	}
	ip := net.ParseIP(svc.Spec.ClusterIP)
	if ip == nil || !a.network.Contains(ip) {
		return field.ErrorList{field.Invalid(path, svc.Spec.ClusterIP, fmt.Sprintf("failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s", svc.Spec.ClusterIP, svc.Spec.ClusterIP, a.network))}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending[svc.Spec.ClusterIP] {
		// handed out by prepareCreate for this very request
		delete(a.pending, svc.Spec.ClusterIP)
		return nil
	}
	if a.used()[svc.Spec.ClusterIP] {
		return field.ErrorList{field.Invalid(path, svc.Spec.ClusterIP, fmt.Sprintf("failed to allocate IP %s: provided IP is already allocated", svc.Spec.ClusterIP))}
	}
	return nil
}
