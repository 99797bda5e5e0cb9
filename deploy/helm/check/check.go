package check

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// irsaAnnotation is the ServiceAccount annotation EKS's pod identity
// webhook reads: the IAM role the pods assume.
const irsaAnnotation = "eks.amazonaws.com/role-arn"

// Check decodes rendered (helm template's output) strictly and checks the
// rules the types cannot say. It returns every problem found, each naming
// the object ("Deployment/name: ..."); none means the manifest passes.
func Check(rendered []byte) []error {
	m, errs := Decode(rendered)
	return append(errs, Rules(m)...)
}

// Rules checks a decoded manifest's objects against each other.
func Rules(m *Manifest) []error {
	c := &checker{m: m, ws: workloads(m)}
	for _, w := range c.ws {
		c.workload(w)
	}
	c.services()
	c.pdbs()
	c.hpas()
	c.serviceMonitors()
	return c.errs
}

type checker struct {
	m    *Manifest
	ws   []*workload
	errs []error
	// httpPorts are the serve containers' HTTP ports by workload, for the
	// ServiceMonitor (whose /metrics is on the HTTP port).
	httpPorts map[*workload]int32
}

func (c *checker) errorf(where, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(where+": "+format, args...))
}

func (c *checker) workload(w *workload) {
	if !matches(w.selector, w.pod.Labels) {
		c.errorf(w.where, "spec.selector does not select the pod template's labels %v", w.pod.Labels)
	}
	pod := &w.pod.Spec
	c.serviceAccount(w, pod)
	if len(pod.Containers) == 0 {
		c.errorf(w.where, "no containers")
	}
	for i := range pod.Containers {
		ct := &pod.Containers[i]
		where := fmt.Sprintf("%s container %s", w.where, ct.Name)
		c.securityContext(where, pod.SecurityContext, ct.SecurityContext)
		if len(ct.Resources.Requests) == 0 {
			c.errorf(where, "no resource requests")
		}
		f := parseArgs(ct)
		st, ok := storeOf(ct, f)
		if !ok {
			c.errorf(where, "no store: neither --store nor TOLLGATE_STORE")
		}
		c.store(w, where, pod, st)
		switch f.command {
		case "serve":
			c.serve(w, where, pod, ct, f)
		case "aggregator":
			if st.kind() != "dynamodb" {
				c.errorf(where, "the aggregator reads a DynamoDB stream, but the store is %q", st.kind())
			}
			c.noProbes(where, ct)
		case "reconcile":
			if k := st.kind(); k == "embedded" || k == "memory" {
				c.errorf(where, "a reconciler of its own over the %s store: the server's process owns that store", k)
			}
			c.noProbes(where, ct)
		default:
			c.errorf(where, "command %q: want serve, aggregator or reconcile", f.command)
		}
	}
}

// serviceAccount checks that the pod's ServiceAccount is rendered.
func (c *checker) serviceAccount(w *workload, pod *corev1.PodSpec) {
	if pod.ServiceAccountName == "" {
		c.errorf(w.where, "no serviceAccountName: the pods would run as the namespace's default account")
		return
	}
	if c.account(pod.ServiceAccountName) == nil {
		c.errorf(w.where, "serviceAccountName %q is not rendered", pod.ServiceAccountName)
	}
}

func (c *checker) account(name string) *corev1.ServiceAccount {
	for _, sa := range c.m.ServiceAccounts {
		if sa.Name == name {
			return sa
		}
	}
	return nil
}

// securityContext checks that a container runs as the image's non-root
// user without privilege escalation (the container's setting overrides
// the pod's).
func (c *checker) securityContext(where string, pod *corev1.PodSecurityContext, ct *corev1.SecurityContext) {
	var nonRoot *bool
	var uid *int64
	if pod != nil {
		nonRoot, uid = pod.RunAsNonRoot, pod.RunAsUser
	}
	if ct != nil {
		if ct.RunAsNonRoot != nil {
			nonRoot = ct.RunAsNonRoot
		}
		if ct.RunAsUser != nil {
			uid = ct.RunAsUser
		}
	}
	if nonRoot == nil || !*nonRoot {
		c.errorf(where, "runAsNonRoot is not true")
	}
	if uid == nil || *uid != imageUID {
		c.errorf(where, "runAsUser is not %d, the image's user", imageUID)
	}
	if ct == nil || ct.AllowPrivilegeEscalation == nil || *ct.AllowPrivilegeEscalation {
		c.errorf(where, "allowPrivilegeEscalation is not false")
	}
}

// store checks what the store's kind asks of the workload: IRSA for
// DynamoDB, a single-replica StatefulSet with its volume for embedded, the
// referenced Secret's key.
func (c *checker) store(w *workload, where string, pod *corev1.PodSpec, st store) {
	switch st.kind() {
	case "dynamodb":
		sa := c.account(pod.ServiceAccountName)
		if sa == nil || !strings.HasPrefix(sa.Annotations[irsaAnnotation], "arn:aws") {
			c.errorf(where, "the DynamoDB store without an IAM role: ServiceAccount %q has no %s annotation", pod.ServiceAccountName, irsaAnnotation)
		}
	case "embedded":
		if w.kind != "StatefulSet" {
			c.errorf(where, "the embedded store in a %s: want a StatefulSet with a volume (one process owns the file)", w.kind)
		}
		if n := effectiveReplicas(w); n != 1 {
			c.errorf(where, "the embedded store with %d replicas: want exactly 1", n)
		}
		dir := path.Dir(strings.TrimPrefix(st.url, "embedded:"))
		if !c.claimMounted(w, dir) {
			c.errorf(where, "the embedded store's directory %s is not on a volumeClaimTemplate", dir)
		}
	case "secret":
		c.secretKey(where, st.secretRef.Name, st.secretRef.Key)
	case "":
		c.errorf(where, "store %q: not a store URL", st.url)
	}
}

func (c *checker) claimMounted(w *workload, dir string) bool {
	for _, ct := range w.pod.Spec.Containers {
		for _, vm := range ct.VolumeMounts {
			if strings.TrimSuffix(vm.MountPath, "/") != dir {
				continue
			}
			if slices.ContainsFunc(w.claims, func(pvc corev1.PersistentVolumeClaim) bool { return pvc.Name == vm.Name }) {
				return true
			}
		}
	}
	return false
}

// secretKey checks that a Secret the chart renders holds the key; one it
// does not render is the user's (keys.existingSecret).
func (c *checker) secretKey(where, name, key string) {
	for _, s := range c.m.Secrets {
		if s.Name != name {
			continue
		}
		_, inData := s.Data[key]
		_, inString := s.StringData[key]
		if !inData && !inString {
			c.errorf(where, "Secret %q has no key %q", name, key)
		}
	}
}

func (c *checker) noProbes(where string, ct *corev1.Container) {
	if ct.ReadinessProbe != nil || ct.LivenessProbe != nil {
		c.errorf(where, "probes on a container that serves no HTTP")
	}
}

// serve checks the server container: its ports, its probes, and the files
// its flags name.
func (c *checker) serve(w *workload, where string, pod *corev1.PodSpec, ct *corev1.Container, f flags) {
	httpPort, err := listenPort(f.values["addr"])
	if err != nil {
		c.errorf(where, "--addr %q: %v", f.values["addr"], err)
		return
	}
	if containerPort(ct, "", httpPort) == 0 {
		c.errorf(where, "--addr's port %d is not a container port", httpPort)
	}
	if c.httpPorts == nil {
		c.httpPorts = map[*workload]int32{}
	}
	c.httpPorts[w] = httpPort
	c.probe(where, "readinessProbe", ct, ct.ReadinessProbe, "/readyz", httpPort)
	c.probe(where, "livenessProbe", ct, ct.LivenessProbe, "/healthz", httpPort)
	c.served(w, where, ct, httpPort, "HTTP")
	if g, ok := f.values["grpc-addr"]; ok {
		p, err := listenPort(g)
		switch {
		case err != nil:
			c.errorf(where, "--grpc-addr %q: %v", g, err)
		case containerPort(ct, "", p) == 0:
			c.errorf(where, "--grpc-addr's port %d is not a container port", p)
		default:
			c.served(w, where, ct, p, "gRPC (Envoy RLS)")
		}
		if _, ok := f.values["rls-config"]; !ok {
			c.errorf(where, "--grpc-addr without --rls-config")
		}
	}
	if p, ok := f.values["keys"]; ok {
		vol, key, err := mountedFile(pod, ct, p)
		switch {
		case err != nil:
			c.errorf(where, "--keys %s: %v", p, err)
		case vol.Secret == nil:
			c.errorf(where, "--keys %s: volume %q is not a Secret", p, vol.Name)
		default:
			c.secretKey(where, vol.Secret.SecretName, key)
		}
	}
	if p, ok := f.values["rls-config"]; ok {
		vol, key, err := mountedFile(pod, ct, p)
		switch {
		case err != nil:
			c.errorf(where, "--rls-config %s: %v", p, err)
		case vol.ConfigMap == nil:
			c.errorf(where, "--rls-config %s: volume %q is not a ConfigMap", p, vol.Name)
		default:
			c.configMapKey(where, vol.ConfigMap.Name, key)
		}
	}
}

func (c *checker) configMapKey(where, name, key string) {
	for _, cm := range c.m.ConfigMaps {
		if cm.Name == name {
			if _, ok := cm.Data[key]; !ok {
				c.errorf(where, "ConfigMap %q has no key %q", name, key)
			}
			return
		}
	}
	c.errorf(where, "ConfigMap %q is not rendered", name)
}

// probe checks an HTTP probe's path and that its port is the server's.
func (c *checker) probe(where, which string, ct *corev1.Container, p *corev1.Probe, wantPath string, port int32) {
	if p == nil || p.HTTPGet == nil {
		c.errorf(where, "%s: want an HTTP GET of %s", which, wantPath)
		return
	}
	if p.HTTPGet.Path != wantPath {
		c.errorf(where, "%s: path %q, want %q", which, p.HTTPGet.Path, wantPath)
	}
	if got := resolve(ct, p.HTTPGet.Port); got != port {
		c.errorf(where, "%s: port %s is not the server's HTTP port %d", which, p.HTTPGet.Port.String(), port)
	}
}

func resolve(ct *corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.String {
		return containerPort(ct, p.StrVal, 0)
	}
	return p.IntVal
}

// served checks that a Service selecting the pods reaches the port.
func (c *checker) served(w *workload, where string, ct *corev1.Container, port int32, what string) {
	for _, s := range c.m.Services {
		if s.Spec.ClusterIP == corev1.ClusterIPNone || !mapMatches(s.Spec.Selector, w.pod.Labels) {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if resolve(ct, sp.TargetPort) == port {
				return
			}
		}
	}
	c.errorf(where, "no Service reaches its %s port %d", what, port)
}
