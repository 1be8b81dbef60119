package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// bindingREST serves pods/binding: it sets spec.nodeName once, and answers 409 Conflict when the
// pod is already bound or being deleted, as the real server does.
type bindingREST struct {
	pods *genericregistry.Store
}

var _ rest.NamedCreater = &bindingREST{}

func (r *bindingREST) New() runtime.Object { return &corev1.Binding{} }
func (r *bindingREST) Destroy()            {}

func (r *bindingREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	binding, ok := obj.(*corev1.Binding)
	if !ok {
		return nil, errors.NewBadRequest(fmt.Sprintf("not a Binding: %T", obj))
	}
	if binding.Name != name {
		return nil, errors.NewBadRequest("name in URL does not match name in Binding object")
	}
	if binding.Target.Kind != "" && binding.Target.Kind != "Node" {
		return nil, errors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name, nil)
	}
	if binding.Target.Name == "" {
		return nil, errors.NewBadRequest("target.name is required")
	}
	if createValidation != nil {
		if err := createValidation(ctx, binding.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	key, err := r.pods.KeyFunc(ctx, name)
	if err != nil {
		return nil, err
	}
	var preconditions *storage.Preconditions
	if binding.UID != "" || binding.ResourceVersion != "" {
		preconditions = &storage.Preconditions{}
		if binding.UID != "" {
			preconditions.UID = &binding.UID
		}
		if binding.ResourceVersion != "" {
			preconditions.ResourceVersion = &binding.ResourceVersion
		}
	}
	dryRun := options != nil && len(options.DryRun) > 0
	podsResource := corev1.Resource("pods")
	err = r.pods.Storage.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, preconditions, storage.SimpleUpdate(func(o runtime.Object) (runtime.Object, error) {
		pod := o.(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, errors.NewConflict(podsResource, name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
		}
		if pod.Spec.NodeName != "" {
			return nil, errors.NewConflict(podsResource, name, fmt.Errorf("pod %s is already assigned to node %q", name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = binding.Target.Name
		for k, v := range binding.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		setPodCondition(pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
		return pod, nil
	}), dryRun, nil)
	if err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess, Code: 201}, nil
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}
