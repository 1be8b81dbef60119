package main

import (
	"context"
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// strategy is the one create/update/delete strategy of every built-in resource. The real server
// validates each kind; this one only keeps status and spec apart, bumps metadata.generation on
// spec changes and runs the per-kind hooks of resources.go.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	res *resource
	// statusOnly is the strategy of the status subresource: everything but status is kept
	statusOnly bool
}

func newStrategy(res *resource, statusOnly bool) *strategy {
	return &strategy{ObjectTyper: scheme, NameGenerator: names.SimpleNameGenerator, res: res, statusOnly: statusOnly}
}

func (s *strategy) NamespaceScoped() bool { return s.res.namespaced }

func (s *strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if s.res.hasStatus && !s.res.statusOnCreate {
		setField(obj, "Status", reflect.Zero(fieldType(obj, "Status")))
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetGeneration(1)
	}
	if s.res.prepareCreate != nil {
		s.res.prepareCreate(ctx, obj)
	}
}

func (s *strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	m, errNew := meta.Accessor(obj)
	o, errOld := meta.Accessor(old)
	if s.statusOnly {
		// keep everything of the stored object but its status and metadata
		nv, ov := reflect.ValueOf(obj).Elem(), reflect.ValueOf(old).Elem()
		for i := 0; i < nv.NumField(); i++ {
			switch nv.Type().Field(i).Name {
			case "TypeMeta", "ObjectMeta", "Status":
				continue
			}
			nv.Field(i).Set(ov.Field(i))
		}
		if errNew == nil && errOld == nil {
			m.SetOwnerReferences(o.GetOwnerReferences())
			m.SetGeneration(o.GetGeneration())
		}
		return
	}
	if s.res.hasStatus {
		setField(obj, "Status", getField(old, "Status"))
	}
	if errNew == nil && errOld == nil {
		m.SetGeneration(o.GetGeneration())
		if !apiequality.Semantic.DeepEqual(specOf(obj), specOf(old)) {
			m.SetGeneration(o.GetGeneration() + 1)
		}
	}
	if s.res.prepareUpdate != nil {
		s.res.prepareUpdate(ctx, obj, old)
	}
}

func (s *strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	if s.res.validate != nil {
		return s.res.validate(ctx, obj)
	}
	return nil
}

func (s *strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if s.res.validateUpdate != nil && !s.statusOnly {
		return s.res.validateUpdate(ctx, obj, old)
	}
	return nil
}

// CheckGracefulDelete makes deletion graceful (deletionTimestamp first, removal later) for the
// kinds that have it in the real server: pods.
func (s *strategy) CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if s.res.gracefulDelete == nil || options == nil {
		return false
	}
	return s.res.gracefulDelete(obj, options)
}

func (s *strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }
func (s *strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}
func (s *strategy) Canonicalize(runtime.Object)    {}
func (s *strategy) AllowCreateOnUpdate() bool      { return s.res.allowCreateOnUpdate }
func (s *strategy) AllowUnconditionalUpdate() bool { return true }

// GetResetFields names what server-side apply must not let a manager own through this endpoint.
func (s *strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	version := fieldpath.APIVersion(s.res.gv.String())
	if s.statusOnly {
		if fieldType(s.res.newObj(), "Spec") == nil {
			return map[fieldpath.APIVersion]*fieldpath.Set{version: fieldpath.NewSet()}
		}
		return map[fieldpath.APIVersion]*fieldpath.Set{version: fieldpath.NewSet(fieldpath.MakePathOrDie("spec"))}
	}
	if s.res.hasStatus {
		return map[fieldpath.APIVersion]*fieldpath.Set{version: fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
	}
	return map[fieldpath.APIVersion]*fieldpath.Set{version: fieldpath.NewSet()}
}

// specOf is every top-level field but metadata and status: what metadata.generation tracks.
func specOf(obj runtime.Object) []interface{} {
	v := reflect.ValueOf(obj).Elem()
	var out []interface{}
	for i := 0; i < v.NumField(); i++ {
		switch v.Type().Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
			continue
		}
		out = append(out, v.Field(i).Interface())
	}
	return out
}

func fieldType(obj runtime.Object, name string) reflect.Type {
	f, ok := reflect.TypeOf(obj).Elem().FieldByName(name)
	if !ok {
		return nil
	}
	return f.Type
}

func getField(obj runtime.Object, name string) reflect.Value {
	f := reflect.ValueOf(obj).Elem().FieldByName(name)
	out := reflect.New(f.Type()).Elem()
	out.Set(f)
	return out
}

func setField(obj runtime.Object, name string, value reflect.Value) {
	f := reflect.ValueOf(obj).Elem().FieldByName(name)
	if f.IsValid() {
		f.Set(value)
	}
}
