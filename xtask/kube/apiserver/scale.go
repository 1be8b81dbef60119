package main

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

// scaleAccess reads and writes the replica counts of a kind with a scale subresource.
type scaleAccess struct {
	get func(obj runtime.Object) (spec, status int32, selector *metav1.LabelSelector)
	set func(obj runtime.Object, replicas int32)
}

// scaleREST serves <resource>/scale as autoscaling/v1 Scale, as the real server does.
type scaleREST struct {
	store  *genericregistry.Store
	access *scaleAccess
}

var (
	_ rest.Patcher                  = &scaleREST{}
	_ rest.GroupVersionKindProvider = &scaleREST{}
)

func (r *scaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }
func (r *scaleREST) Destroy()            {}

func (r *scaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

func (r *scaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return r.toScale(obj)
}

func (r *scaleREST) toScale(obj runtime.Object) (*autoscalingv1.Scale, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	spec, status, selector := r.access.get(obj)
	sel := ""
	if selector != nil {
		s, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return nil, err
		}
		sel = s.String()
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: sel},
	}, nil
}

func (r *scaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	var result *autoscalingv1.Scale
	update := rest.DefaultUpdatedObjectInfo(nil, func(ctx context.Context, newObj, oldObj runtime.Object) (runtime.Object, error) {
		oldScale, err := r.toScale(oldObj)
		if err != nil {
			return nil, err
		}
		scaled, err := objInfo.UpdatedObject(ctx, oldScale)
		if err != nil {
			return nil, err
		}
		scale, ok := scaled.(*autoscalingv1.Scale)
		if !ok {
			return nil, errors.NewBadRequest(fmt.Sprintf("expected Scale, got %T", scaled))
		}
		if scale.Spec.Replicas < 0 {
			return nil, errors.NewBadRequest("spec.replicas must not be negative")
		}
		obj := oldObj.DeepCopyObject()
		r.access.set(obj, scale.Spec.Replicas)
		if m, err := metaOf(obj); err == nil && scale.ResourceVersion != "" {
			m.SetResourceVersion(scale.ResourceVersion)
		}
		return obj, nil
	})
	obj, _, err := r.store.Update(ctx, name, update, createValidation, nil, false, options)
	if err != nil {
		return nil, false, err
	}
	result, err = r.toScale(obj)
	return result, false, err
}
