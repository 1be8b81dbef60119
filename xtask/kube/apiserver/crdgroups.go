package main

import (
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/version"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// listCRDGroups keeps the CRDs' groups in the non-aggregated /apis document of the built-in
// server, which clients without aggregated discovery read. (kube-apiserver gets them there
// through its aggregation layer's APIServices; the aggregated document has them already.)
func listCRDGroups(server *genericapiserver.GenericAPIServer, extensions *apiextensionsapiserver.CustomResourceDefinitions) error {
	informer := extensions.Informers.Apiextensions().V1().CustomResourceDefinitions()
	listed := map[string]bool{}
	sync := func() {
		crds, err := informer.Lister().List(labels.Everything())
		if err != nil {
			klog.InfoS("listing CRDs for discovery", "err", err)
			return
		}
		groups := map[string]map[string]bool{}
		for _, crd := range crds {
			for _, v := range crd.Spec.Versions {
				if !v.Served || !established(crd) {
					continue
				}
				if groups[crd.Spec.Group] == nil {
					groups[crd.Spec.Group] = map[string]bool{}
				}
				groups[crd.Spec.Group][v.Name] = true
			}
		}
		for group, versions := range groups {
			var names []string
			for v := range versions {
				names = append(names, v)
			}
			sort.Slice(names, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(names[i], names[j]) > 0 })
			apiGroup := metav1.APIGroup{Name: group}
			for _, v := range names {
				apiGroup.Versions = append(apiGroup.Versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + v, Version: v})
			}
			apiGroup.PreferredVersion = apiGroup.Versions[0]
			server.DiscoveryGroupManager.AddGroup(apiGroup)
			listed[group] = true
		}
		for group := range listed {
			if groups[group] == nil {
				server.DiscoveryGroupManager.RemoveGroup(group)
				delete(listed, group)
			}
		}
	}
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { sync() },
		UpdateFunc: func(interface{}, interface{}) { sync() },
		DeleteFunc: func(interface{}) { sync() },
	})
	return err
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
