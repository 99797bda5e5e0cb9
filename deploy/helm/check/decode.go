package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Manifest is a rendered chart, each object decoded into its typed struct.
type Manifest struct {
	Deployments     []*appsv1.Deployment
	StatefulSets    []*appsv1.StatefulSet
	Services        []*corev1.Service
	Secrets         []*corev1.Secret
	ConfigMaps      []*corev1.ConfigMap
	ServiceAccounts []*corev1.ServiceAccount
	PDBs            []*policyv1.PodDisruptionBudget
	HPAs            []*autoscalingv2.HorizontalPodAutoscaler
	ServiceMonitors []*monitoringv1.ServiceMonitor
}

// Count is the number of objects of every kind in m.
func (m *Manifest) Count() int {
	return len(m.Deployments) + len(m.StatefulSets) + len(m.Services) + len(m.Secrets) + len(m.ConfigMaps) +
		len(m.ServiceAccounts) + len(m.PDBs) + len(m.HPAs) + len(m.ServiceMonitors)
}

// kinds are the apiVersion and kind pairs the chart may render: anything
// else (a misspelt kind, a removed API version) is an error rather than an
// object nobody checked.
var kinds = map[string]func(m *Manifest) any{
	"apps/v1/Deployment": func(m *Manifest) any { o := &appsv1.Deployment{}; m.Deployments = append(m.Deployments, o); return o },
	"apps/v1/StatefulSet": func(m *Manifest) any {
		o := &appsv1.StatefulSet{}
		m.StatefulSets = append(m.StatefulSets, o)
		return o
	},
	"v1/Service":   func(m *Manifest) any { o := &corev1.Service{}; m.Services = append(m.Services, o); return o },
	"v1/Secret":    func(m *Manifest) any { o := &corev1.Secret{}; m.Secrets = append(m.Secrets, o); return o },
	"v1/ConfigMap": func(m *Manifest) any { o := &corev1.ConfigMap{}; m.ConfigMaps = append(m.ConfigMaps, o); return o },
	"v1/ServiceAccount": func(m *Manifest) any {
		o := &corev1.ServiceAccount{}
		m.ServiceAccounts = append(m.ServiceAccounts, o)
		return o
	},
	"policy/v1/PodDisruptionBudget": func(m *Manifest) any {
		o := &policyv1.PodDisruptionBudget{}
		m.PDBs = append(m.PDBs, o)
		return o
	},
	"autoscaling/v2/HorizontalPodAutoscaler": func(m *Manifest) any {
		o := &autoscalingv2.HorizontalPodAutoscaler{}
		m.HPAs = append(m.HPAs, o)
		return o
	},
	"monitoring.coreos.com/v1/ServiceMonitor": func(m *Manifest) any {
		o := &monitoringv1.ServiceMonitor{}
		m.ServiceMonitors = append(m.ServiceMonitors, o)
		return o
	},
}

// Decode reads the documents of helm template's output, each strictly:
// an unknown field, a duplicate key or a value of the wrong type is an
// error naming the document, as the API server's strict field validation
// would refuse it.
func Decode(rendered []byte) (*Manifest, []error) {
	m := &Manifest{}
	var errs []error
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(rendered)))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, append(errs, fmt.Errorf("document %d: %w", i, err))
		}
		if isEmpty(doc) {
			continue
		}
		var tm struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i, err))
			continue
		}
		where := fmt.Sprintf("%s/%s", tm.Kind, tm.Metadata.Name)
		newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: apiVersion %q kind %q is not one the chart renders", where, tm.APIVersion, tm.Kind))
			continue
		}
		obj := newObj(m)
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		errs = append(errs, checkMeta(where, tm.Kind, obj.(metav1.Object))...)
	}
	return m, errs
}

// isEmpty reports whether a document holds only comments and blank lines
// (helm template writes one per template that rendered nothing).
func isEmpty(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && line != "---" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// checkMeta checks the object's name and labels as the API server would.
func checkMeta(where, kind string, o metav1.Object) []error {
	var errs []error
	nameRule := validation.IsDNS1123Subdomain
	if kind == "Service" {
		nameRule = validation.IsDNS1035Label
	}
	for _, msg := range nameRule(o.GetName()) {
		errs = append(errs, fmt.Errorf("%s: metadata.name: %s", where, msg))
	}
	labels := o.GetLabels()
	for k, v := range labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("%s: label %q: %s", where, k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("%s: label %s=%q: %s", where, k, v, msg))
		}
	}
	return errs
}
