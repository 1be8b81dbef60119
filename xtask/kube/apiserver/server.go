package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionsoptions "k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	generatedopenapi "slurmdev/openapi"
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
`

func run(o options) error {
	ips, err := newClusterIPs(o.serviceCIDR)
	if err != nil {
		return err
	}
	certs := pki{dir: o.dataDir}
	serverURL := "https://" + net.JoinHostPort(o.bindAddress, strconv.Itoa(o.securePort))
	if err := certs.ensure(serverURL, net.ParseIP(ips.kubernetesIP())); err != nil {
		return fmt.Errorf("certificates in %s: %w", o.dataDir, err)
	}
	policyFile := filepath.Join(o.dataDir, "audit-policy.yaml")
	if err := os.WriteFile(policyFile, []byte(auditPolicy), 0o644); err != nil {
		return err
	}

	runOptions := genericoptions.NewServerRunOptions()
	if err := runOptions.Complete(); err != nil {
		return err
	}
	ro := genericoptions.NewRecommendedOptions(o.etcdPrefix, codecs.LegacyCodec(builtinGroupVersions...))
	ro.Etcd.StorageConfig.Transport.ServerList = strings.Split(o.etcdServers, ",")
	ro.SecureServing.BindAddress = net.ParseIP(o.bindAddress)
	ro.SecureServing.BindPort = o.securePort
	ro.SecureServing.ServerCert.CertKey = genericoptions.CertKey{CertFile: certs.path("apiserver.crt"), KeyFile: certs.path("apiserver.key")}
	ro.Audit.LogOptions.Path = o.auditLogPath
	ro.Audit.PolicyFile = policyFile
	// the admission policy plugins need the admissionregistration policy resources, not served here
	ro.Admission.DisablePlugins = []string{"ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"}
	// priority and fairness needs the flowcontrol resources, not served here
	ro.Features.EnablePriorityAndFairness = false

	cfg := genericapiserver.NewRecommendedConfig(codecs)
	if err := runOptions.ApplyTo(&cfg.Config); err != nil {
		return err
	}
	if err := ro.Etcd.ApplyTo(&cfg.Config); err != nil {
		return err
	}
	if err := ro.SecureServing.ApplyTo(&cfg.Config.SecureServing, &cfg.Config.LoopbackClientConfig); err != nil {
		return err
	}
	if err := applyAuth(&cfg.Config, certs.path("ca.crt"), o.tokenAuthFile); err != nil {
		return fmt.Errorf("authentication: %w", err)
	}
	if err := ro.Audit.ApplyTo(&cfg.Config); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	cfg.ClientConfig = cfg.LoopbackClientConfig
	// as kube-apiserver: no request timeout for watches and the kubelet's streams
	cfg.LongRunningFunc = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch", "proxy"), sets.NewString("attach", "exec", "proxy", "log", "portforward"))
	client, err := kubernetes.NewForConfig(cfg.LoopbackClientConfig)
	if err != nil {
		return err
	}
	dynamicClient, err := dynamic.NewForConfig(cfg.LoopbackClientConfig)
	if err != nil {
		return err
	}
	cfg.SharedInformerFactory = informers.NewSharedInformerFactory(client, 10*time.Minute)
	if err := ro.Features.ApplyTo(&cfg.Config, client, cfg.SharedInformerFactory); err != nil {
		return err
	}
	serviceResolver, authWrapper, err := serviceWebhooks(o.netdSocket, cfg.LoopbackClientConfig, noopoteltrace.NewTracerProvider())
	if err != nil {
		return err
	}
	webhookInit := webhookinit.NewPluginInitializer(authWrapper, serviceResolver)
	if err := ro.Admission.ApplyTo(&cfg.Config, cfg.SharedInformerFactory, client, dynamicClient, utilfeature.DefaultFeatureGate, cfg.EffectiveVersion, webhookInit); err != nil {
		return fmt.Errorf("admission: %w", err)
	}

	namer := openapinamer.NewDefinitionNamer(scheme, apiextensionsapiserver.Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title = "Kubernetes"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "Kubernetes"
	cfg.MergedResourceConfig = serverstorage.NewResourceConfig()
	cfg.MergedResourceConfig.EnableVersions(builtinGroupVersions...)
	// one aggregated discovery document for the built-in groups and the CRDs' groups
	cfg.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")

	extensions, err := newExtensionsServer(cfg, ro, serviceResolver, authWrapper)
	if err != nil {
		return fmt.Errorf("apiextensions: %w", err)
	}
	server, err := cfg.Complete().New("kube-apiserver", extensions.GenericAPIServer)
	if err != nil {
		return err
	}
	resources := builtinResources(ips)
	if err := registerFieldLabels(resources); err != nil {
		return err
	}
	kubelet, err := newKubeletClient(certs)
	if err != nil {
		return fmt.Errorf("kubelet client: %w", err)
	}
	namespaces, err := installBuiltins(server, cfg.RESTOptionsGetter, resources, ips, kubelet)
	if err != nil {
		return err
	}
	if err := listCRDGroups(server, extensions); err != nil {
		return err
	}
	server.AddPostStartHookOrDie("slurm-dev-bootstrap", bootstrapHook(ips, o.securePort))
	server.AddPostStartHookOrDie("slurm-dev-garbage-collector", garbageCollectorHook(namespaces.finalize))

	ctx := genericapiserver.SetupSignalContext()
	return server.PrepareRun().RunWithContext(ctx)
}

// newExtensionsServer is apiextensions-apiserver on the same configuration, as kube-apiserver
// wires it: a shallow copy with its own storage codec and resource configuration.
func newExtensionsServer(cfg *genericapiserver.RecommendedConfig, ro *genericoptions.RecommendedOptions, serviceResolver webhook.ServiceResolver, authWrapper webhook.AuthenticationInfoResolverWrapper) (*apiextensionsapiserver.CustomResourceDefinitions, error) {
	extCfg := cfg.Config
	extCfg.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	extCfg.RESTOptionsGetter = nil
	etcd := *ro.Etcd
	etcd.StorageConfig.Codec = apiextensionsapiserver.Codecs.LegacyCodec(apiextensionsv1beta1.SchemeGroupVersion, apiextensionsv1.SchemeGroupVersion)
	etcd.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(apiextensionsv1beta1.SchemeGroupVersion, schema.GroupKind{Group: apiextensionsv1beta1.GroupName})
	etcd.SkipHealthEndpoints = true
	if err := etcd.ApplyTo(&extCfg); err != nil {
		return nil, err
	}
	if err := genericoptions.NewAPIEnablementOptions().ApplyTo(&extCfg, apiextensionsapiserver.DefaultAPIResourceConfigSource(), apiextensionsapiserver.Scheme); err != nil {
		return nil, err
	}
	config := &apiextensionsapiserver.Config{
		GenericConfig: &genericapiserver.RecommendedConfig{Config: extCfg, SharedInformerFactory: cfg.SharedInformerFactory},
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: apiextensionsoptions.NewCRDRESTOptionsGetter(etcd, extCfg.ResourceTransformers, extCfg.StorageObjectCountTracker),
			MasterCount:          1,
			// conversion webhooks of a Service reach it as admission webhooks do (servicedial.go)
			ServiceResolver:     serviceResolver,
			AuthResolverWrapper: authWrapper,
		},
	}
	return config.Complete().New(genericapiserver.NewEmptyDelegate())
}

// installBuiltins serves every built-in resource from the generic etcd registry.
func installBuiltins(server *genericapiserver.GenericAPIServer, optsGetter generic.RESTOptionsGetter, resources []*resource, ips *clusterIPs, kubelet *kubeletClient) (*namespaceStore, error) {
	var namespaces *namespaceStore
	var pods, pdbs *genericregistry.Store
	groups := map[string]*genericapiserver.APIGroupInfo{}
	var order []string
	for _, r := range resources {
		info, ok := groups[r.gv.Group]
		if !ok {
			i := genericapiserver.NewDefaultAPIGroupInfo(r.gv.Group, scheme, podParameterCodec{metav1.ParameterCodec}, codecs)
			info = &i
			groups[r.gv.Group] = info
			order = append(order, r.gv.Group)
		}
		storage, store, err := r.buildStorage(optsGetter)
		if err != nil {
			return nil, err
		}
		switch r.gv.WithResource(r.plural).GroupResource().String() {
		case "pods":
			storage["pods/binding"] = &bindingREST{pods: store}
			kubelet.pods = store
			storage["pods/log"] = &podLogREST{kubelet: kubelet}
			for _, kind := range []string{"exec", "attach", "portforward"} {
				storage["pods/"+kind] = &podStreamREST{kubelet: kubelet, kind: kind}
			}
			pods = store
		case "nodes":
			kubelet.nodes = store
		case "poddisruptionbudgets.policy":
			pdbs = store
		case "services":
			ips.store = store
		case "namespaces":
			namespaces = &namespaceStore{mainStore: storage["namespaces"].(*mainStore)}
			storage["namespaces"] = namespaces
		}
		if info.VersionedResourcesStorageMap[r.gv.Version] == nil {
			info.VersionedResourcesStorageMap[r.gv.Version] = map[string]rest.Storage{}
		}
		for path, s := range storage {
			info.VersionedResourcesStorageMap[r.gv.Version][path] = s
		}
	}
	if pods != nil && pdbs != nil {
		groups[""].VersionedResourcesStorageMap["v1"]["pods/eviction"] = &evictionREST{pods: pods, pdbs: pdbs}
	}
	for _, group := range order {
		info := groups[group]
		var err error
		if group == "" {
			err = server.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, info)
		} else {
			err = server.InstallAPIGroup(info)
		}
		if err != nil {
			return nil, fmt.Errorf("installing API group %q: %w", group, err)
		}
	}
	return namespaces, nil
}
