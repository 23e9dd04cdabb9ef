package deploy

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every agent that reads its GPUs from exporters names a dns+ URL of a
// headless Service these manifests define, at one of its ports: a
// ClusterIP Service would show one node's GPUs.
func TestAgentsReadEveryGPUNode(t *testing.T) {
	objs := manifests(t)
	headless := map[string][]int{} // name.namespace -> ports
	for _, o := range objs["Service"] {
		s := o.(*service)
		if s.Spec.ClusterIP != "None" {
			continue
		}
		for _, p := range s.Spec.Ports {
			headless[s.Metadata.Name+"."+s.Metadata.Namespace] = append(headless[s.Metadata.Name+"."+s.Metadata.Namespace], p.Port)
		}
	}
	var pods []podTemplate
	for _, o := range objs["Deployment"] {
		pods = append(pods, o.(*deployment).Spec.Template)
	}
	for _, o := range objs["Job"] {
		pods = append(pods, o.(*job).Spec.Template)
	}
	checked := 0
	for _, p := range pods {
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name != "GPU_METRICS_URL" {
				continue
			}
			checked++
			rest, ok := strings.CutPrefix(e.Value, "dns+")
			u, err := url.Parse(rest)
			if !ok || err != nil || u.Scheme != "http" {
				t.Errorf("GPU_METRICS_URL %q: want dns+http://service.namespace.svc:port/metrics", e.Value)
				continue
			}
			svc := strings.TrimSuffix(u.Hostname(), ".svc")
			port, _ := strconv.Atoi(u.Port())
			ports, found := headless[svc]
			if !found || !slices.Contains(ports, port) {
				t.Errorf("GPU_METRICS_URL %q: no headless Service %s with port %d in deploy/kubernetes (have %v)", e.Value, svc, port, headless)
			}
		}
	}
	if checked == 0 {
		t.Error("no agent reads its GPUs from exporters")
	}
}
