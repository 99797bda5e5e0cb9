package check

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// services checks that every Service selects pods, and that each of its
// ports reaches a port those pods have.
func (c *checker) services() {
	for _, s := range c.m.Services {
		where := "Service/" + s.Name
		var selected []*workload
		for _, w := range c.ws {
			if mapMatches(s.Spec.Selector, w.pod.Labels) {
				selected = append(selected, w)
			}
		}
		if len(selected) == 0 {
			c.errorf(where, "selector %v selects no workload's pods", s.Spec.Selector)
			continue
		}
		for _, sp := range s.Spec.Ports {
			for _, w := range selected {
				if !podHasPort(w, sp.TargetPort, sp.Port) {
					c.errorf(where, "port %s: target port %s is not a port of %s", sp.Name, sp.TargetPort.String(), w.where)
				}
			}
		}
	}
}

func podHasPort(w *workload, target intstr.IntOrString, port int32) bool {
	for i := range w.pod.Spec.Containers {
		ct := &w.pod.Spec.Containers[i]
		switch {
		case target.Type == intstr.String && target.StrVal != "":
			if containerPort(ct, target.StrVal, 0) != 0 {
				return true
			}
		case target.IntVal != 0:
			if containerPort(ct, "", target.IntVal) != 0 {
				return true
			}
		default: // an unset targetPort is the Service port
			if containerPort(ct, "", port) != 0 {
				return true
			}
		}
	}
	return false
}

// minReplicas is the fewest replicas a workload runs: its HPA's minimum
// when one scales it.
func (c *checker) minReplicas(w *workload) int32 {
	for _, h := range c.m.HPAs {
		if h.Spec.ScaleTargetRef.Kind == w.kind && h.Spec.ScaleTargetRef.Name == w.name {
			if h.Spec.MinReplicas == nil {
				return 1
			}
			return *h.Spec.MinReplicas
		}
	}
	return effectiveReplicas(w)
}

// pdbs checks that each budget selects the server's pods and leaves room
// for one voluntary eviction (else a node drain never ends).
func (c *checker) pdbs() {
	for _, p := range c.m.PDBs {
		where := "PodDisruptionBudget/" + p.Name
		var selected []*workload
		for _, w := range c.ws {
			if matches(p.Spec.Selector, w.pod.Labels) {
				selected = append(selected, w)
			}
		}
		if len(selected) == 0 {
			c.errorf(where, "selector selects no workload's pods")
		}
		if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.Type != intstr.Int {
			continue
		}
		for _, w := range selected {
			if n := c.minReplicas(w); p.Spec.MinAvailable.IntVal >= n {
				c.errorf(where, "minAvailable %d with %d replicas of %s: no pod could ever be evicted", p.Spec.MinAvailable.IntVal, n, w.where)
			}
		}
	}
}

// hpas checks that each autoscaler scales a rendered Deployment that
// leaves its replicas to it.
func (c *checker) hpas() {
	for _, h := range c.m.HPAs {
		where := "HorizontalPodAutoscaler/" + h.Name
		ref := h.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" {
			c.errorf(where, "scaleTargetRef %s %s: want an apps/v1 Deployment", ref.APIVersion, ref.Kind)
		}
		var target *workload
		for _, w := range c.ws {
			if w.kind == ref.Kind && w.name == ref.Name {
				target = w
			}
		}
		if target == nil {
			c.errorf(where, "scaleTargetRef %s/%s is not rendered", ref.Kind, ref.Name)
		} else if target.replicas != nil {
			c.errorf(where, "%s sets replicas, which every upgrade would reset under the autoscaler", target.where)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			c.errorf(where, "want 1 <= minReplicas <= maxReplicas (%d)", h.Spec.MaxReplicas)
		}
	}
}

// serviceMonitors checks that each ServiceMonitor scrapes /metrics on a
// named port of a Service that reaches a server's HTTP port.
func (c *checker) serviceMonitors() {
	for _, sm := range c.m.ServiceMonitors {
		where := "ServiceMonitor/" + sm.Name
		var selected []*corev1.Service
		for _, s := range c.m.Services {
			if matches(&sm.Spec.Selector, s.Labels) {
				selected = append(selected, s)
			}
		}
		if len(selected) != 1 {
			c.errorf(where, "selector selects %d Services, want 1 (each would be scraped)", len(selected))
		}
		if len(sm.Spec.Endpoints) == 0 {
			c.errorf(where, "no endpoints")
		}
		for _, ep := range sm.Spec.Endpoints {
			if ep.Path != "/metrics" {
				c.errorf(where, "endpoint path %q, want /metrics", ep.Path)
			}
			for _, s := range selected {
				if !c.reachesHTTP(s, ep.Port) {
					c.errorf(where, "endpoint port %q is not a port of Service/%s reaching the server's HTTP port", ep.Port, s.Name)
				}
			}
		}
	}
}

func (c *checker) reachesHTTP(s *corev1.Service, portName string) bool {
	for _, sp := range s.Spec.Ports {
		if portName == "" || sp.Name != portName {
			continue
		}
		for w, httpPort := range c.httpPorts {
			if !mapMatches(s.Spec.Selector, w.pod.Labels) {
				continue
			}
			for i := range w.pod.Spec.Containers {
				if resolve(&w.pod.Spec.Containers[i], sp.TargetPort) == httpPort {
					return true
				}
			}
		}
	}
	return false
}
