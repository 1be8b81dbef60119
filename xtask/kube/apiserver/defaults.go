package main

import (
	"context"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults that clients rely on, a subset of the real server's defaulting functions. They are
// registered with the scheme, so they run whenever a request body is decoded (create, update,
// patch, apply), as in the real server.
func init() {
	scheme.AddTypeDefaultingFunc(&corev1.Pod{}, func(o interface{}) { defaultPodSpec(&o.(*corev1.Pod).Spec) })
	scheme.AddTypeDefaultingFunc(&corev1.PodTemplate{}, func(o interface{}) { defaultPodSpec(&o.(*corev1.PodTemplate).Template.Spec) })
	scheme.AddTypeDefaultingFunc(&corev1.Service{}, func(o interface{}) { defaultService(o.(*corev1.Service)) })
	scheme.AddTypeDefaultingFunc(&corev1.Secret{}, func(o interface{}) {
		s := o.(*corev1.Secret)
		if s.Type == "" {
			s.Type = corev1.SecretTypeOpaque
		}
		// stringData is write-only: the real server merges it into data (it wins) and drops it.
		if len(s.StringData) > 0 {
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			for k, v := range s.StringData {
				s.Data[k] = []byte(v)
			}
			s.StringData = nil
		}
	})
	scheme.AddTypeDefaultingFunc(&admissionregistrationv1.ValidatingWebhookConfiguration{}, func(o interface{}) {
		for i := range o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks {
			w := &o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks[i]
			defaultWebhook(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules)
		}
	})
	scheme.AddTypeDefaultingFunc(&admissionregistrationv1.MutatingWebhookConfiguration{}, func(o interface{}) {
		for i := range o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks {
			w := &o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks[i]
			defaultWebhook(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules)
			if w.ReinvocationPolicy == nil {
				w.ReinvocationPolicy = ptr(admissionregistrationv1.NeverReinvocationPolicy)
			}
		}
	})
	scheme.AddTypeDefaultingFunc(&corev1.PersistentVolumeClaim{}, func(o interface{}) {
		if c := o.(*corev1.PersistentVolumeClaim); c.Spec.VolumeMode == nil {
			mode := corev1.PersistentVolumeFilesystem
			c.Spec.VolumeMode = &mode
		}
	})
	scheme.AddTypeDefaultingFunc(&appsv1.Deployment{}, func(o interface{}) { defaultDeployment(o.(*appsv1.Deployment)) })
	scheme.AddTypeDefaultingFunc(&appsv1.StatefulSet{}, func(o interface{}) { defaultStatefulSet(o.(*appsv1.StatefulSet)) })
	scheme.AddTypeDefaultingFunc(&appsv1.ReplicaSet{}, func(o interface{}) {
		rs := o.(*appsv1.ReplicaSet)
		defaultReplicas(&rs.Spec.Replicas)
		defaultPodSpec(&rs.Spec.Template.Spec)
	})
	scheme.AddTypeDefaultingFunc(&appsv1.DaemonSet{}, func(o interface{}) { defaultDaemonSet(o.(*appsv1.DaemonSet)) })
	scheme.AddTypeDefaultingFunc(&batchv1.Job{}, func(o interface{}) { defaultJobSpec(&o.(*batchv1.Job).Spec) })
	scheme.AddTypeDefaultingFunc(&batchv1.CronJob{}, func(o interface{}) { defaultCronJob(o.(*batchv1.CronJob)) })
}

func ptr[T any](v T) *T { return &v }

// The admissionregistration/v1 defaults of the real server: without them an absent selector
// matches nothing in the dispatcher, and the webhook is silently never called.
func defaultWebhook(failure **admissionregistrationv1.FailurePolicyType, match **admissionregistrationv1.MatchPolicyType, nsSel, objSel **metav1.LabelSelector, timeout **int32, rules []admissionregistrationv1.RuleWithOperations) {
	if *failure == nil {
		*failure = ptr(admissionregistrationv1.Fail)
	}
	if *match == nil {
		*match = ptr(admissionregistrationv1.Equivalent)
	}
	if *nsSel == nil {
		*nsSel = &metav1.LabelSelector{}
	}
	if *objSel == nil {
		*objSel = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		*timeout = ptr(int32(10))
	}
	for i := range rules {
		if rules[i].Scope == nil {
			rules[i].Scope = ptr(admissionregistrationv1.AllScopes)
		}
	}
}

func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr(corev1.DefaultEnableServiceLinks)
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
}

func defaultContainer(c *corev1.Container) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if imageTag(c.Image) == "latest" {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
}

// imageTag is the tag of an image reference, "latest" when it has neither tag nor digest.
func imageTag(image string) string {
	if strings.Contains(image, "@") {
		return ""
	}
	name := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(name, ":"); i >= 0 {
		return name[i+1:]
	}
	return "latest"
}

func defaultService(s *corev1.Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.InternalTrafficPolicy == nil {
		s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyCluster)
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
}

func defaultReplicas(r **int32) {
	if *r == nil {
		*r = ptr(int32(1))
	}
}

func defaultDeployment(d *appsv1.Deployment) {
	defaultReplicas(&d.Spec.Replicas)
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if d.Spec.Strategy.RollingUpdate == nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromString("25%"))
		}
		if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptr(intstr.FromString("25%"))
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr(int32(10))
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr(int32(600))
	}
	defaultPodSpec(&d.Spec.Template.Spec)
}

func defaultStatefulSet(s *appsv1.StatefulSet) {
	defaultReplicas(&s.Spec.Replicas)
	if s.Spec.PodManagementPolicy == "" {
		s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.Spec.UpdateStrategy.Type == "" {
		s.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if s.Spec.UpdateStrategy.RollingUpdate == nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if s.Spec.UpdateStrategy.RollingUpdate.Partition == nil {
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr(int32(0))
		}
	}
	if s.Spec.RevisionHistoryLimit == nil {
		s.Spec.RevisionHistoryLimit = ptr(int32(10))
	}
	if s.Spec.PersistentVolumeClaimRetentionPolicy == nil {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		}
	}
	for i := range s.Spec.VolumeClaimTemplates {
		c := &s.Spec.VolumeClaimTemplates[i]
		if c.Spec.VolumeMode == nil {
			c.Spec.VolumeMode = ptr(corev1.PersistentVolumeFilesystem)
		}
	}
	defaultPodSpec(&s.Spec.Template.Spec)
}

func defaultDaemonSet(d *appsv1.DaemonSet) {
	if d.Spec.UpdateStrategy.Type == "" {
		d.Spec.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if d.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if d.Spec.UpdateStrategy.RollingUpdate == nil {
			d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if d.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable == nil {
			d.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(1))
		}
		if d.Spec.UpdateStrategy.RollingUpdate.MaxSurge == nil {
			d.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr(intstr.FromInt32(0))
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr(int32(10))
	}
	defaultPodSpec(&d.Spec.Template.Spec)
}

func defaultJobSpec(spec *batchv1.JobSpec) {
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = ptr(int32(1))
	}
	if spec.Parallelism == nil {
		spec.Parallelism = ptr(int32(1))
	}
	if spec.BackoffLimit == nil {
		spec.BackoffLimit = ptr(int32(6))
	}
	if spec.CompletionMode == nil {
		spec.CompletionMode = ptr(batchv1.NonIndexedCompletion)
	}
	if spec.Suspend == nil {
		spec.Suspend = ptr(false)
	}
	if spec.PodReplacementPolicy == nil {
		spec.PodReplacementPolicy = ptr(batchv1.TerminatingOrFailed)
	}
	defaultPodSpec(&spec.Template.Spec)
}

func defaultCronJob(c *batchv1.CronJob) {
	if c.Spec.ConcurrencyPolicy == "" {
		c.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if c.Spec.Suspend == nil {
		c.Spec.Suspend = ptr(false)
	}
	if c.Spec.SuccessfulJobsHistoryLimit == nil {
		c.Spec.SuccessfulJobsHistoryLimit = ptr(int32(3))
	}
	if c.Spec.FailedJobsHistoryLimit == nil {
		c.Spec.FailedJobsHistoryLimit = ptr(int32(1))
	}
	defaultJobSpec(&c.Spec.JobTemplate.Spec)
}

// Create-time preparation: what the real strategies do in PrepareForCreate.

func preparePodCreate(_ context.Context, obj runtime.Object) {
	pod := obj.(*corev1.Pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: qosClass(&pod.Spec)}
	if pod.Spec.NodeName != "" {
		// created already bound, as a DaemonSet controller or a kubelet's static pod does
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	}
}

// qosClass follows the rules of the real server: Guaranteed when every container has equal
// cpu and memory requests and limits, BestEffort when none has any, else Burstable.
func qosClass(spec *corev1.PodSpec) corev1.PodQOSClass {
	requests, limits, guaranteed := 0, 0, true
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		requests += len(c.Resources.Requests)
		limits += len(c.Resources.Limits)
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			l, hasLimit := c.Resources.Limits[name]
			r, hasRequest := c.Resources.Requests[name]
			if !hasLimit || (hasRequest && r.Cmp(l) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case requests == 0 && limits == 0:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
	}
}

func prepareNamespaceCreate(_ context.Context, obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	ns.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
	labels := ns.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[corev1.LabelMetadataName] = ns.Name
	ns.SetLabels(labels)
}

func prepareSecret(_ context.Context, obj runtime.Object) {
	if s := obj.(*corev1.Secret); s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
}

func prepareDeployment(_ context.Context, obj runtime.Object) {
	defaultDeployment(obj.(*appsv1.Deployment))
}
func prepareStatefulSet(_ context.Context, obj runtime.Object) {
	defaultStatefulSet(obj.(*appsv1.StatefulSet))
}
func prepareDaemonSet(_ context.Context, obj runtime.Object) {
	defaultDaemonSet(obj.(*appsv1.DaemonSet))
}
func prepareCronJob(_ context.Context, obj runtime.Object) { defaultCronJob(obj.(*batchv1.CronJob)) }

func prepareReplicaSet(_ context.Context, obj runtime.Object) {
	rs := obj.(*appsv1.ReplicaSet)
	defaultReplicas(&rs.Spec.Replicas)
}

// prepareJob generates the selector and the pod template labels from the Job's UID unless
// spec.manualSelector is true, as the real server does.
func prepareJob(_ context.Context, obj runtime.Object) {
	job := obj.(*batchv1.Job)
	defaultJobSpec(&job.Spec)
	if job.Spec.ManualSelector != nil && *job.Spec.ManualSelector {
		return
	}
	uid := string(job.UID)
	generated := map[string]string{
		batchv1.ControllerUidLabel: uid,
		batchv1.JobNameLabel:       job.Name,
		"controller-uid":           uid,
		"job-name":                 job.Name,
	}
	if job.Spec.Template.Labels == nil {
		job.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range generated {
		job.Spec.Template.Labels[k] = v
	}
	job.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: uid}}
}

// podGracefulDelete: a pod bound to a node is deleted gracefully, with the grace period of the
// request or else of its spec, so that its kubelet can stop it and then remove it; an unbound or
// finished pod goes at once.
func podGracefulDelete(obj runtime.Object, options *metav1.DeleteOptions) bool {
	pod := obj.(*corev1.Pod)
	period := int64(0)
	if options.GracePeriodSeconds != nil {
		period = *options.GracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	options.GracePeriodSeconds = &period
	return true
}
