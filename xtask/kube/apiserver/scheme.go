package main

import (
	"reflect"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// The built-in groups are served straight from the versioned k8s.io/api types. There are no
// internal types: every versioned type is also registered as its group's internal version, so
// the scheme's conversion to and from "internal" is the identity.
var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

var builtinGroupVersions = []schema.GroupVersion{
	corev1.SchemeGroupVersion,
	appsv1.SchemeGroupVersion,
	batchv1.SchemeGroupVersion,
	policyv1.SchemeGroupVersion,
	coordinationv1.SchemeGroupVersion,
	discoveryv1.SchemeGroupVersion,
	schedulingv1.SchemeGroupVersion,
	rbacv1.SchemeGroupVersion,
	admissionregistrationv1.SchemeGroupVersion,
	eventsv1.SchemeGroupVersion,
	// v2 before v1: HorizontalPodAutoscaler is served as v2; v1 only brings the Scale kind
	autoscalingv2.SchemeGroupVersion,
	autoscalingv1.SchemeGroupVersion,
	storagev1.SchemeGroupVersion,
	resourcev1.SchemeGroupVersion,
}

func init() {
	builders := []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme,
		coordinationv1.AddToScheme, discoveryv1.AddToScheme, schedulingv1.AddToScheme,
		rbacv1.AddToScheme, admissionregistrationv1.AddToScheme, eventsv1.AddToScheme,
		autoscalingv1.AddToScheme, autoscalingv2.AddToScheme, storagev1.AddToScheme,
		resourcev1.AddToScheme,
	}
	for _, add := range builders {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	metaPkg := reflect.TypeOf(metav1.ObjectMeta{}).PkgPath()
	registered := map[schema.GroupKind]bool{}
	for _, gv := range builtinGroupVersions {
		internal := schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}
		for kind, t := range scheme.KnownTypes(gv) {
			gk := schema.GroupKind{Group: gv.Group, Kind: kind}
			if t.PkgPath() == metaPkg || registered[gk] {
				continue
			}
			if _, exists := scheme.KnownTypes(internal)[kind]; exists {
				continue
			}
			registered[gk] = true
			scheme.AddKnownTypeWithName(internal.WithKind(kind), reflect.New(t).Interface().(runtime.Object))
		}
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
}
