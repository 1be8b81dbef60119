package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// resource describes one built-in resource: everything else is generic.
type resource struct {
	gv               schema.GroupVersion
	plural, singular string
	kind             string
	namespaced       bool
	newObj, newList  func() runtime.Object
	hasStatus        bool
	// statusOnCreate keeps the status a create sends (nodes: a kubelet registers with it)
	statusOnCreate      bool
	scale               *scaleAccess
	shortNames          []string
	categories          []string
	allowCreateOnUpdate bool
	// selectable fields beyond metadata.name and metadata.namespace
	fields         func(obj runtime.Object) fields.Set
	table          *tableSpec
	prepareCreate  func(ctx context.Context, obj runtime.Object)
	prepareUpdate  func(ctx context.Context, obj, old runtime.Object)
	validate       func(ctx context.Context, obj runtime.Object) field.ErrorList
	validateUpdate func(ctx context.Context, obj, old runtime.Object) field.ErrorList
	// gracefulDelete sets options.GracePeriodSeconds and says whether deletion is graceful
	gracefulDelete func(obj runtime.Object, options *metav1.DeleteOptions) bool
}

// mainStore is a genericregistry.Store that also answers discovery's short names and categories.
type mainStore struct {
	*genericregistry.Store
	res *resource
}

func (s *mainStore) ShortNames() []string { return s.res.shortNames }
func (s *mainStore) Categories() []string { return s.res.categories }

func (r *resource) selectableFields(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, nil, err
	}
	set := fields.Set{"metadata.name": m.GetName()}
	if r.namespaced {
		set["metadata.namespace"] = m.GetNamespace()
	}
	if r.fields != nil {
		for k, v := range r.fields(obj) {
			set[k] = v
		}
	}
	return labels.Set(m.GetLabels()), set, nil
}

// buildStorage returns the storage map entries of one resource: the resource and its subresources.
func (r *resource) buildStorage(optsGetter generic.RESTOptionsGetter) (map[string]rest.Storage, *genericregistry.Store, error) {
	qualified := schema.GroupResource{Group: r.gv.Group, Resource: r.plural}
	store := &genericregistry.Store{
		NewFunc:                   r.newObj,
		NewListFunc:               r.newList,
		DefaultQualifiedResource:  qualified,
		SingularQualifiedResource: schema.GroupResource{Group: r.gv.Group, Resource: r.singular},
		PredicateFunc: func(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
			return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: r.selectableFields}
		},
		CreateStrategy:      newStrategy(r, false),
		UpdateStrategy:      newStrategy(r, false),
		DeleteStrategy:      newStrategy(r, false),
		ResetFieldsStrategy: newStrategy(r, false),
		TableConvertor:      r.tableConvertor(),
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: r.selectableFields}); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", qualified, err)
	}
	out := map[string]rest.Storage{r.plural: &mainStore{Store: store, res: r}}
	if r.hasStatus {
		statusStore := *store
		statusStore.CreateStrategy = nil
		statusStore.DeleteStrategy = nil
		statusStore.UpdateStrategy = newStrategy(r, true)
		statusStore.ResetFieldsStrategy = newStrategy(r, true)
		out[r.plural+"/status"] = &statusREST{store: &statusStore}
	}
	if r.scale != nil {
		out[r.plural+"/scale"] = &scaleREST{store: store, access: r.scale}
	}
	return out, store, nil
}

// statusREST serves the status subresource: get, update and patch of the same object.
type statusREST struct {
	store *genericregistry.Store
}

var _ rest.Patcher = &statusREST{}

func (r *statusREST) New() runtime.Object { return r.store.New() }
func (r *statusREST) Destroy()            {}

func (r *statusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

func (r *statusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// subresources never create
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

func (r *statusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

func (r *statusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}
