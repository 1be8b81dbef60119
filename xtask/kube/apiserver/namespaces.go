package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// namespaceStore deletes a namespace in two steps, as the real server does: while
// spec.finalizers is not empty a delete only marks it Terminating (deletionTimestamp set); the
// namespace deleter in gc.go empties it and then calls finalize, which removes it.
type namespaceStore struct {
	*mainStore
}

func (s *namespaceStore) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := s.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if len(ns.Spec.Finalizers) == 0 {
		return s.Store.Delete(ctx, name, deleteValidation, options)
	}
	if ns.DeletionTimestamp != nil {
		return ns, false, nil
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, obj); err != nil {
			return nil, false, err
		}
	}
	key, err := s.KeyFunc(ctx, name)
	if err != nil {
		return nil, false, err
	}
	var preconditions *storage.Preconditions
	if options != nil && options.Preconditions != nil {
		preconditions = &storage.Preconditions{UID: options.Preconditions.UID, ResourceVersion: options.Preconditions.ResourceVersion}
	}
	dryRun := options != nil && len(options.DryRun) > 0
	out := &corev1.Namespace{}
	err = s.Storage.GuaranteedUpdate(ctx, key, out, false, preconditions, storage.SimpleUpdate(func(o runtime.Object) (runtime.Object, error) {
		ns := o.(*corev1.Namespace)
		if ns.DeletionTimestamp == nil {
			now := metav1.Now()
			ns.DeletionTimestamp = &now
			ns.DeletionGracePeriodSeconds = ptr(int64(0))
		}
		ns.Status.Phase = corev1.NamespaceTerminating
		return ns, nil
	}), dryRun, nil)
	if err != nil {
		return nil, false, err
	}
	return out, false, nil
}

// finalize drops the `kubernetes` finalizer of a Terminating namespace and removes it.
func (s *namespaceStore) finalize(ctx context.Context, name string) error {
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	key, err := s.KeyFunc(ctx, name)
	if err != nil {
		return err
	}
	err = s.Storage.GuaranteedUpdate(ctx, key, &corev1.Namespace{}, false, nil, storage.SimpleUpdate(func(o runtime.Object) (runtime.Object, error) {
		ns := o.(*corev1.Namespace)
		var kept []corev1.FinalizerName
		for _, f := range ns.Spec.Finalizers {
			if f != corev1.FinalizerKubernetes {
				kept = append(kept, f)
			}
		}
		ns.Spec.Finalizers = kept
		return ns, nil
	}), false, nil)
	if err != nil {
		return err
	}
	_, _, err = s.Store.Delete(ctx, name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	return err
}
