package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// evictionREST serves pods/eviction: the pod is deleted unless a PodDisruptionBudget that selects
// it allows no disruption (429 TooManyRequests, as in the real server). A running pod's eviction
// spends one of the budget's status.disruptionsAllowed, which whatever plays the disruption
// controller must compute; pods that are Pending, Succeeded or Failed are evicted regardless.
type evictionREST struct {
	pods, pdbs *genericregistry.Store
}

var (
	_ rest.NamedCreater             = &evictionREST{}
	_ rest.GroupVersionKindProvider = &evictionREST{}
)

func (r *evictionREST) New() runtime.Object { return &policyv1.Eviction{} }
func (r *evictionREST) Destroy()            {}

func (r *evictionREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return policyv1.SchemeGroupVersion.WithKind("Eviction")
}

func (r *evictionREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	eviction, ok := obj.(*policyv1.Eviction)
	if !ok {
		return nil, errors.NewBadRequest(fmt.Sprintf("not an Eviction: %T", obj))
	}
	if eviction.Name != name {
		return nil, errors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if createValidation != nil {
		if err := createValidation(ctx, eviction.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	got, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod := got.(*corev1.Pod)
	switch pod.Status.Phase {
	case corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed:
	default:
		if err := r.spendBudget(ctx, pod, options); err != nil {
			return nil, err
		}
	}
	deleteOptions := eviction.DeleteOptions
	if deleteOptions == nil {
		deleteOptions = &metav1.DeleteOptions{}
	}
	if options != nil && len(options.DryRun) > 0 {
		deleteOptions.DryRun = options.DryRun
	}
	if _, _, err := r.pods.Delete(ctx, name, rest.ValidateAllObjectFunc, deleteOptions); err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess, Code: 201}, nil
}

func (r *evictionREST) spendBudget(ctx context.Context, pod *corev1.Pod, options *metav1.CreateOptions) error {
	list, err := r.pdbs.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return err
	}
	var matching []policyv1.PodDisruptionBudget
	for _, pdb := range list.(*policyv1.PodDisruptionBudgetList).Items {
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || selector.Empty() || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		matching = append(matching, pdb)
	}
	switch len(matching) {
	case 0:
		return nil
	case 1:
	default:
		return errors.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget, which the eviction subresource does not support"))
	}
	pdb := matching[0]
	key, err := r.pdbs.KeyFunc(ctx, pdb.Name)
	if err != nil {
		return err
	}
	dryRun := options != nil && len(options.DryRun) > 0
	return r.pdbs.Storage.GuaranteedUpdate(ctx, key, &policyv1.PodDisruptionBudget{}, false, nil, storage.SimpleUpdate(func(o runtime.Object) (runtime.Object, error) {
		budget := o.(*policyv1.PodDisruptionBudget)
		if budget.Status.DisruptionsAllowed <= 0 {
			err := errors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
				Type:    policyv1.DisruptionBudgetCause,
				Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", budget.Name, budget.Status.DesiredHealthy, budget.Status.CurrentHealthy),
			})
			return nil, err
		}
		budget.Status.DisruptionsAllowed--
		if budget.Status.DisruptedPods == nil {
			budget.Status.DisruptedPods = map[string]metav1.Time{}
		}
		budget.Status.DisruptedPods[pod.Name] = metav1.NewTime(time.Now())
		return budget, nil
	}), dryRun, nil)
}
