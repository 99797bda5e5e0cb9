package check

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The image's user (internal/mkimage): the chart must run as it, never root.
const imageUID = 65532

// workload is a Deployment or a StatefulSet, as the rules see them.
type workload struct {
	where    string // "Deployment/name"
	kind     string
	name     string
	replicas *int32
	selector *metav1.LabelSelector
	pod      *corev1.PodTemplateSpec
	claims   []corev1.PersistentVolumeClaim
}

func workloads(m *Manifest) []*workload {
	var ws []*workload
	for _, d := range m.Deployments {
		ws = append(ws, &workload{where: "Deployment/" + d.Name, kind: "Deployment", name: d.Name,
			replicas: d.Spec.Replicas, selector: d.Spec.Selector, pod: &d.Spec.Template})
	}
	for _, s := range m.StatefulSets {
		ws = append(ws, &workload{where: "StatefulSet/" + s.Name, kind: "StatefulSet", name: s.Name,
			replicas: s.Spec.Replicas, selector: s.Spec.Selector, pod: &s.Spec.Template, claims: s.Spec.VolumeClaimTemplates})
	}
	return ws
}

// matches reports whether a label selector (as in a PDB or a workload)
// selects the labels; an empty or invalid selector selects nothing here.
func matches(sel *metav1.LabelSelector, l map[string]string) bool {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

// mapMatches reports whether a Service's selector selects the labels.
func mapMatches(sel, l map[string]string) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(l))
}

// flags are a tollgate command line: its command and its --name=value
// (or --name value) flags.
type flags struct {
	command string
	values  map[string]string
}

func parseArgs(c *corev1.Container) flags {
	args := append(append([]string(nil), c.Command...), c.Args...)
	if len(args) > 0 && (args[0] == "/tollgate" || args[0] == "tollgate") {
		args = args[1:]
	}
	f := flags{values: map[string]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			if f.command == "" {
				f.command = a
			}
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") && !isBoolFlag(name) {
			value = args[i+1]
			i++
		}
		f.values[name] = value
	}
	return f
}

func isBoolFlag(name string) bool {
	return name == "allow-unauthenticated" || name == "once" || name == "upkeep"
}

// store is the store URL a container runs on: from --store, else from
// TOLLGATE_STORE (a value, or a reference to a Secret's key).
type store struct {
	url       string
	secretRef *corev1.SecretKeySelector
}

func (s store) kind() string {
	switch {
	case s.secretRef != nil:
		return "secret"
	case strings.HasPrefix(s.url, "dynamodb://"):
		return "dynamodb"
	case strings.HasPrefix(s.url, "embedded:"):
		return "embedded"
	case strings.HasPrefix(s.url, "redis://"), strings.HasPrefix(s.url, "rediss://"), strings.HasPrefix(s.url, "redis+cluster://"):
		return "redis"
	case strings.HasPrefix(s.url, "memory:"):
		return "memory"
	}
	return ""
}

func storeOf(c *corev1.Container, f flags) (store, bool) {
	if u, ok := f.values["store"]; ok {
		return store{url: u}, true
	}
	for _, e := range c.Env {
		if e.Name != "TOLLGATE_STORE" {
			continue
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return store{secretRef: e.ValueFrom.SecretKeyRef}, true
		}
		return store{url: e.Value}, e.Value != ""
	}
	return store{}, false
}

// listenPort is the port of a host:port flag.
func listenPort(addr string) (int32, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil || n <= 0 || n > 65535 {
		return 0, fmt.Errorf("port %q", p)
	}
	return int32(n), nil
}

// containerPort resolves a probe's or a Service's target port (a number
// or a port name) to the container's port number; 0 if it names none.
func containerPort(c *corev1.Container, name string, number int32) int32 {
	for _, p := range c.Ports {
		if (name != "" && p.Name == name) || (name == "" && p.ContainerPort == number) {
			return p.ContainerPort
		}
	}
	return 0
}

// mountedFile finds the volume that holds the file at p in the pod: the
// mount whose path is p's directory, the volume it mounts, and the key of
// the Secret or ConfigMap that becomes the file.
func mountedFile(pod *corev1.PodSpec, c *corev1.Container, p string) (vol *corev1.Volume, key string, err error) {
	dir, file := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if strings.TrimSuffix(c.VolumeMounts[i].MountPath, "/") == dir {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil {
		return nil, "", fmt.Errorf("no volume is mounted at %s", dir)
	}
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == mount.Name {
			vol = &pod.Volumes[i]
		}
	}
	if vol == nil {
		return nil, "", fmt.Errorf("volume %q mounted at %s is not in the pod", mount.Name, dir)
	}
	var items []corev1.KeyToPath
	switch {
	case vol.Secret != nil:
		items = vol.Secret.Items
	case vol.ConfigMap != nil:
		items = vol.ConfigMap.Items
	default:
		return vol, "", fmt.Errorf("volume %q is neither a Secret nor a ConfigMap", vol.Name)
	}
	if len(items) == 0 {
		return vol, file, nil
	}
	for _, it := range items {
		if it.Path == file {
			return vol, it.Key, nil
		}
	}
	return vol, "", fmt.Errorf("volume %q has no item at %s", vol.Name, file)
}

// effectiveReplicas is what a workload runs with when nothing scales it:
// the API server's default is 1.
func effectiveReplicas(w *workload) int32 {
	if w.replicas == nil {
		return 1
	}
	return *w.replicas
}
