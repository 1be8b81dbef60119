package main

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
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
)

func res(gv schema.GroupVersion, kind, plural, singular string, namespaced bool, newObj, newList func() runtime.Object) *resource {
	return &resource{gv: gv, kind: kind, plural: plural, singular: singular, namespaced: namespaced, newObj: newObj, newList: newList}
}

func (r *resource) withStatus() *resource           { r.hasStatus = true; return r }
func (r *resource) short(names ...string) *resource { r.shortNames = names; return r }
func (r *resource) all() *resource                  { r.categories = []string{"all"}; return r }

// builtinResources lists every built-in resource this server stores, with the hand-written
// behaviour of each (defaults.go, services.go, fields.go, tables.go).
func builtinResources(ips *clusterIPs) []*resource {
	core, apps, batch := corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion, batchv1.SchemeGroupVersion

	pods := res(core, "Pod", "pods", "pod", true, func() runtime.Object { return &corev1.Pod{} }, func() runtime.Object { return &corev1.PodList{} }).withStatus().short("po").all()
	pods.fields = podFields
	pods.table = podTable
	pods.prepareCreate = preparePodCreate
	pods.gracefulDelete = podGracefulDelete

	services := res(core, "Service", "services", "service", true, func() runtime.Object { return &corev1.Service{} }, func() runtime.Object { return &corev1.ServiceList{} }).withStatus().short("svc").all()
	services.prepareCreate = ips.prepareCreate
	services.prepareUpdate = ips.prepareUpdate
	services.validate = ips.validate
	services.table = serviceTable

	namespaces := res(core, "Namespace", "namespaces", "namespace", false, func() runtime.Object { return &corev1.Namespace{} }, func() runtime.Object { return &corev1.NamespaceList{} }).withStatus().short("ns")
	namespaces.prepareCreate = prepareNamespaceCreate
	namespaces.fields = namespaceFields
	namespaces.table = namespaceTable

	nodes := res(core, "Node", "nodes", "node", false, func() runtime.Object { return &corev1.Node{} }, func() runtime.Object { return &corev1.NodeList{} }).withStatus().short("no")
	nodes.fields = nodeFields
	nodes.statusOnCreate = true
	nodes.table = nodeTable

	events := res(core, "Event", "events", "event", true, func() runtime.Object { return &corev1.Event{} }, func() runtime.Object { return &corev1.EventList{} }).short("ev")
	events.fields = eventFields
	events.table = eventTable

	secrets := res(core, "Secret", "secrets", "secret", true, func() runtime.Object { return &corev1.Secret{} }, func() runtime.Object { return &corev1.SecretList{} })
	secrets.fields = secretFields
	secrets.prepareCreate = prepareSecret

	deployments := res(apps, "Deployment", "deployments", "deployment", true, func() runtime.Object { return &appsv1.Deployment{} }, func() runtime.Object { return &appsv1.DeploymentList{} }).withStatus().short("deploy").all()
	deployments.prepareCreate = prepareDeployment
	deployments.prepareUpdate = func(ctx context.Context, obj, old runtime.Object) { prepareDeployment(ctx, obj) }
	deployments.scale = &scaleAccess{
		get: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
			d := o.(*appsv1.Deployment)
			return deref(d.Spec.Replicas, 1), d.Status.Replicas, d.Spec.Selector
		},
		set: func(o runtime.Object, n int32) { o.(*appsv1.Deployment).Spec.Replicas = &n },
	}
	deployments.table = deploymentTable

	statefulsets := res(apps, "StatefulSet", "statefulsets", "statefulset", true, func() runtime.Object { return &appsv1.StatefulSet{} }, func() runtime.Object { return &appsv1.StatefulSetList{} }).withStatus().short("sts").all()
	statefulsets.prepareCreate = prepareStatefulSet
	statefulsets.prepareUpdate = func(ctx context.Context, obj, old runtime.Object) { prepareStatefulSet(ctx, obj) }
	statefulsets.scale = &scaleAccess{
		get: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
			s := o.(*appsv1.StatefulSet)
			return deref(s.Spec.Replicas, 1), s.Status.Replicas, s.Spec.Selector
		},
		set: func(o runtime.Object, n int32) { o.(*appsv1.StatefulSet).Spec.Replicas = &n },
	}
	statefulsets.table = statefulSetTable

	replicasets := res(apps, "ReplicaSet", "replicasets", "replicaset", true, func() runtime.Object { return &appsv1.ReplicaSet{} }, func() runtime.Object { return &appsv1.ReplicaSetList{} }).withStatus().short("rs").all()
	replicasets.prepareCreate = prepareReplicaSet
	replicasets.prepareUpdate = func(ctx context.Context, obj, old runtime.Object) { prepareReplicaSet(ctx, obj) }
	replicasets.scale = &scaleAccess{
		get: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
			s := o.(*appsv1.ReplicaSet)
			return deref(s.Spec.Replicas, 1), s.Status.Replicas, s.Spec.Selector
		},
		set: func(o runtime.Object, n int32) { o.(*appsv1.ReplicaSet).Spec.Replicas = &n },
	}
	replicasets.table = replicaSetTable

	daemonsets := res(apps, "DaemonSet", "daemonsets", "daemonset", true, func() runtime.Object { return &appsv1.DaemonSet{} }, func() runtime.Object { return &appsv1.DaemonSetList{} }).withStatus().short("ds").all()
	daemonsets.prepareCreate = prepareDaemonSet
	daemonsets.prepareUpdate = func(ctx context.Context, obj, old runtime.Object) { prepareDaemonSet(ctx, obj) }

	jobs := res(batch, "Job", "jobs", "job", true, func() runtime.Object { return &batchv1.Job{} }, func() runtime.Object { return &batchv1.JobList{} }).withStatus().all()
	jobs.prepareCreate = prepareJob
	jobs.table = jobTable

	cronjobs := res(batch, "CronJob", "cronjobs", "cronjob", true, func() runtime.Object { return &batchv1.CronJob{} }, func() runtime.Object { return &batchv1.CronJobList{} }).withStatus().short("cj").all()
	cronjobs.prepareCreate = prepareCronJob

	return []*resource{
		pods, services, namespaces, nodes, events, secrets,
		res(core, "ConfigMap", "configmaps", "configmap", true, func() runtime.Object { return &corev1.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMapList{} }).short("cm"),
		res(core, "Endpoints", "endpoints", "endpoints", true, func() runtime.Object { return &corev1.Endpoints{} }, func() runtime.Object { return &corev1.EndpointsList{} }).short("ep"),
		res(core, "ServiceAccount", "serviceaccounts", "serviceaccount", true, func() runtime.Object { return &corev1.ServiceAccount{} }, func() runtime.Object { return &corev1.ServiceAccountList{} }).short("sa"),
		res(core, "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim", true, func() runtime.Object { return &corev1.PersistentVolumeClaim{} }, func() runtime.Object { return &corev1.PersistentVolumeClaimList{} }).withStatus().short("pvc"),
		res(core, "PersistentVolume", "persistentvolumes", "persistentvolume", false, func() runtime.Object { return &corev1.PersistentVolume{} }, func() runtime.Object { return &corev1.PersistentVolumeList{} }).withStatus().short("pv"),
		res(core, "LimitRange", "limitranges", "limitrange", true, func() runtime.Object { return &corev1.LimitRange{} }, func() runtime.Object { return &corev1.LimitRangeList{} }).short("limits"),
		res(core, "ResourceQuota", "resourcequotas", "resourcequota", true, func() runtime.Object { return &corev1.ResourceQuota{} }, func() runtime.Object { return &corev1.ResourceQuotaList{} }).withStatus().short("quota"),
		res(core, "PodTemplate", "podtemplates", "podtemplate", true, func() runtime.Object { return &corev1.PodTemplate{} }, func() runtime.Object { return &corev1.PodTemplateList{} }),
		res(core, "ReplicationController", "replicationcontrollers", "replicationcontroller", true, func() runtime.Object { return &corev1.ReplicationController{} }, func() runtime.Object { return &corev1.ReplicationControllerList{} }).withStatus().short("rc"),

		deployments, statefulsets, replicasets, daemonsets,
		res(apps, "ControllerRevision", "controllerrevisions", "controllerrevision", true, func() runtime.Object { return &appsv1.ControllerRevision{} }, func() runtime.Object { return &appsv1.ControllerRevisionList{} }),

		jobs, cronjobs,

		res(policyv1.SchemeGroupVersion, "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget", true, func() runtime.Object { return &policyv1.PodDisruptionBudget{} }, func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} }).withStatus().short("pdb"),
		res(coordinationv1.SchemeGroupVersion, "Lease", "leases", "lease", true, func() runtime.Object { return &coordinationv1.Lease{} }, func() runtime.Object { return &coordinationv1.LeaseList{} }),
		res(discoveryv1.SchemeGroupVersion, "EndpointSlice", "endpointslices", "endpointslice", true, func() runtime.Object { return &discoveryv1.EndpointSlice{} }, func() runtime.Object { return &discoveryv1.EndpointSliceList{} }),
		res(schedulingv1.SchemeGroupVersion, "PriorityClass", "priorityclasses", "priorityclass", false, func() runtime.Object { return &schedulingv1.PriorityClass{} }, func() runtime.Object { return &schedulingv1.PriorityClassList{} }).short("pc"),

		res(rbacv1.SchemeGroupVersion, "Role", "roles", "role", true, func() runtime.Object { return &rbacv1.Role{} }, func() runtime.Object { return &rbacv1.RoleList{} }),
		res(rbacv1.SchemeGroupVersion, "RoleBinding", "rolebindings", "rolebinding", true, func() runtime.Object { return &rbacv1.RoleBinding{} }, func() runtime.Object { return &rbacv1.RoleBindingList{} }),
		res(rbacv1.SchemeGroupVersion, "ClusterRole", "clusterroles", "clusterrole", false, func() runtime.Object { return &rbacv1.ClusterRole{} }, func() runtime.Object { return &rbacv1.ClusterRoleList{} }),
		res(rbacv1.SchemeGroupVersion, "ClusterRoleBinding", "clusterrolebindings", "clusterrolebinding", false, func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} }),

		res(admissionregistrationv1.SchemeGroupVersion, "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", "mutatingwebhookconfiguration", false, func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} }, func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} }),
		res(admissionregistrationv1.SchemeGroupVersion, "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", "validatingwebhookconfiguration", false, func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} }, func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} }),

		res(eventsv1.SchemeGroupVersion, "Event", "events", "event", true, func() runtime.Object { return &eventsv1.Event{} }, func() runtime.Object { return &eventsv1.EventList{} }).short("ev"),
		res(autoscalingv2.SchemeGroupVersion, "HorizontalPodAutoscaler", "horizontalpodautoscalers", "horizontalpodautoscaler", true, func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} }, func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} }).withStatus().short("hpa").all(),
		res(storagev1.SchemeGroupVersion, "StorageClass", "storageclasses", "storageclass", false, func() runtime.Object { return &storagev1.StorageClass{} }, func() runtime.Object { return &storagev1.StorageClassList{} }).short("sc"),

		res(resourcev1.SchemeGroupVersion, "ResourceClaim", "resourceclaims", "resourceclaim", true, func() runtime.Object { return &resourcev1.ResourceClaim{} }, func() runtime.Object { return &resourcev1.ResourceClaimList{} }).withStatus(),
		res(resourcev1.SchemeGroupVersion, "ResourceClaimTemplate", "resourceclaimtemplates", "resourceclaimtemplate", true, func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} }, func() runtime.Object { return &resourcev1.ResourceClaimTemplateList{} }),
		res(resourcev1.SchemeGroupVersion, "DeviceClass", "deviceclasses", "deviceclass", false, func() runtime.Object { return &resourcev1.DeviceClass{} }, func() runtime.Object { return &resourcev1.DeviceClassList{} }),
		res(resourcev1.SchemeGroupVersion, "ResourceSlice", "resourceslices", "resourceslice", false, func() runtime.Object { return &resourcev1.ResourceSlice{} }, func() runtime.Object { return &resourcev1.ResourceSliceList{} }),
	}
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
