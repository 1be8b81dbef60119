package main

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Server-side tables for `kubectl get`: the columns of the real server's printers for the common
// kinds; every other kind gets NAME and AGE.

type tableSpec struct {
	columns []metav1.TableColumnDefinition
	// cells returns the cells after NAME (AGE is placed where the "Age" column is)
	cells func(obj runtime.Object, age string) []interface{}
}

func col(name, typ string, priority int32) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Priority: priority}
}

type tableConvertor struct {
	spec *tableSpec
}

func (r *resource) tableConvertor() rest.TableConvertor {
	if r.table == nil {
		return tableConvertor{spec: &tableSpec{
			columns: []metav1.TableColumnDefinition{col("Age", "string", 0)},
			cells:   func(_ runtime.Object, age string) []interface{} { return []interface{}{age} },
		}}
	}
	return tableConvertor{spec: r.table}
}

func (c tableConvertor) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	columns := append([]metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: "Name of the object"}}, c.spec.columns...)
	rows, err := metatable.MetaToTableRow(obj, func(o runtime.Object, _ metav1.Object, name, age string) ([]interface{}, error) {
		return append([]interface{}{name}, c.spec.cells(o, age)...), nil
	})
	if err != nil {
		return nil, err
	}
	table := &metav1.Table{ColumnDefinitions: columns, Rows: rows}
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
		table.RemainingItemCount = m.GetRemainingItemCount()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

var podTable = &tableSpec{
	columns: []metav1.TableColumnDefinition{
		col("Ready", "string", 0), col("Status", "string", 0), col("Restarts", "string", 0), col("Age", "string", 0),
		col("IP", "string", 1), col("Node", "string", 1),
	},
	cells: func(o runtime.Object, age string) []interface{} {
		pod := o.(*corev1.Pod)
		ready, restarts, total := 0, int32(0), len(pod.Spec.Containers)
		for _, s := range pod.Status.ContainerStatuses {
			restarts += s.RestartCount
			if s.Ready {
				ready++
			}
		}
		// Sidecars (init containers with restartPolicy Always) count as containers, as
		// kube-apiserver's printer counts them.
		for _, s := range pod.Status.InitContainerStatuses {
			restarts += s.RestartCount
			if isSidecar(pod, s.Name) {
				total++
				if s.Ready {
					ready++
				}
			}
		}
		return []interface{}{
			fmt.Sprintf("%d/%d", ready, total), podStatusReason(pod), fmt.Sprint(restarts), age,
			orNone(pod.Status.PodIP), orNone(pod.Spec.NodeName),
		}
	},
}

// isSidecar tells whether the pod's init container `name` is a sidecar (restartPolicy Always).
func isSidecar(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}

// podStatusReason is the STATUS column: the phase, or what explains it better.
func podStatusReason(pod *corev1.Pod) string {
	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for i, s := range pod.Status.InitContainerStatuses {
		switch {
		case s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
			continue
		case isSidecar(pod, s.Name) && s.Started != nil && *s.Started:
			// a sidecar that started has done its part of the init sequence
			continue
		case s.State.Terminated != nil:
			return "Init:" + orDefault(s.State.Terminated.Reason, "Error")
		case s.State.Waiting != nil && s.State.Waiting.Reason != "" && s.State.Waiting.Reason != "PodInitializing":
			return "Init:" + s.State.Waiting.Reason
		default:
			return fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Waiting != nil && s.State.Waiting.Reason != "" {
			reason = s.State.Waiting.Reason
		} else if s.State.Terminated != nil && s.State.Terminated.Reason != "" {
			reason = s.State.Terminated.Reason
		}
	}
	if pod.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	return reason
}

var nodeTable = &tableSpec{
	columns: []metav1.TableColumnDefinition{
		col("Status", "string", 0), col("Roles", "string", 0), col("Age", "string", 0), col("Version", "string", 0),
		col("Internal-IP", "string", 1),
	},
	cells: func(o runtime.Object, age string) []interface{} {
		node := o.(*corev1.Node)
		status := "Unknown"
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				status = map[corev1.ConditionStatus]string{corev1.ConditionTrue: "Ready", corev1.ConditionFalse: "NotReady"}[c.Status]
				if status == "" {
					status = "Unknown"
				}
			}
		}
		if node.Spec.Unschedulable {
			status += ",SchedulingDisabled"
		}
		var roles []string
		for k := range node.Labels {
			if r, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && r != "" {
				roles = append(roles, r)
			}
		}
		ip := "<none>"
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		return []interface{}{status, orNone(strings.Join(roles, ",")), age, node.Status.NodeInfo.KubeletVersion, ip}
	},
}

var serviceTable = &tableSpec{
	columns: []metav1.TableColumnDefinition{
		col("Type", "string", 0), col("Cluster-IP", "string", 0), col("External-IP", "string", 0), col("Port(s)", "string", 0), col("Age", "string", 0),
	},
	cells: func(o runtime.Object, age string) []interface{} {
		svc := o.(*corev1.Service)
		var ports []string
		for _, p := range svc.Spec.Ports {
			s := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
			if p.NodePort != 0 {
				s = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
			}
			ports = append(ports, s)
		}
		external := "<none>"
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			external = svc.Spec.ExternalName
		} else if len(svc.Spec.ExternalIPs) > 0 {
			external = strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return []interface{}{string(svc.Spec.Type), orNone(svc.Spec.ClusterIP), external, orNone(strings.Join(ports, ",")), age}
	},
}

var namespaceTable = &tableSpec{
	columns: []metav1.TableColumnDefinition{col("Status", "string", 0), col("Age", "string", 0)},
	cells: func(o runtime.Object, age string) []interface{} {
		return []interface{}{string(o.(*corev1.Namespace).Status.Phase), age}
	},
}

var eventTable = &tableSpec{
	columns: []metav1.TableColumnDefinition{col("Type", "string", 0), col("Reason", "string", 0), col("Object", "string", 0), col("Message", "string", 0), col("Age", "string", 1)},
	cells: func(o runtime.Object, age string) []interface{} {
		e := o.(*corev1.Event)
		object := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
		return []interface{}{e.Type, e.Reason, object, strings.TrimSpace(e.Message), age}
	},
}

func workloadTable(get func(o runtime.Object) (ready, desired, updated, available int32)) *tableSpec {
	return &tableSpec{
		columns: []metav1.TableColumnDefinition{col("Ready", "string", 0), col("Up-to-date", "integer", 0), col("Available", "integer", 0), col("Age", "string", 0)},
		cells: func(o runtime.Object, age string) []interface{} {
			ready, desired, updated, available := get(o)
			return []interface{}{fmt.Sprintf("%d/%d", ready, desired), int64(updated), int64(available), age}
		},
	}
}

var deploymentTable = workloadTable(func(o runtime.Object) (int32, int32, int32, int32) {
	d := o.(*appsv1.Deployment)
	return d.Status.ReadyReplicas, deref(d.Spec.Replicas, 1), d.Status.UpdatedReplicas, d.Status.AvailableReplicas
})

var statefulSetTable = &tableSpec{
	columns: []metav1.TableColumnDefinition{col("Ready", "string", 0), col("Age", "string", 0)},
	cells: func(o runtime.Object, age string) []interface{} {
		s := o.(*appsv1.StatefulSet)
		return []interface{}{fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, deref(s.Spec.Replicas, 1)), age}
	},
}

var replicaSetTable = &tableSpec{
	columns: []metav1.TableColumnDefinition{col("Desired", "integer", 0), col("Current", "integer", 0), col("Ready", "integer", 0), col("Age", "string", 0)},
	cells: func(o runtime.Object, age string) []interface{} {
		s := o.(*appsv1.ReplicaSet)
		return []interface{}{int64(deref(s.Spec.Replicas, 1)), int64(s.Status.Replicas), int64(s.Status.ReadyReplicas), age}
	},
}

var jobTable = &tableSpec{
	columns: []metav1.TableColumnDefinition{col("Status", "string", 0), col("Completions", "string", 0), col("Duration", "string", 0), col("Age", "string", 0)},
	cells: func(o runtime.Object, age string) []interface{} {
		job := o.(*batchv1.Job)
		status := "Running"
		for _, c := range job.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				status = "Complete"
			case batchv1.JobFailed:
				status = "Failed"
			case batchv1.JobSuspended:
				status = "Suspended"
			}
		}
		completions := fmt.Sprintf("%d/%d", job.Status.Succeeded, deref(job.Spec.Completions, 1))
		duration := ""
		if job.Status.StartTime != nil {
			end := metav1.Now()
			if job.Status.CompletionTime != nil {
				end = *job.Status.CompletionTime
			}
			duration = end.Sub(job.Status.StartTime.Time).Round(1e9).String()
		}
		return []interface{}{status, completions, duration, age}
	},
}

func orNone(s string) string { return orDefault(s, "<none>") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
