package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The manifests are decoded strictly (an unknown field is an error) into
// minimal copies of the Kubernetes types they use, rather than into
// k8s.io/api's: that module and k8s.io/apimachinery would bring some forty
// modules into a project whose own dependencies are a handful, for a test
// that needs a few dozen fields. Strict decoding still catches what
// kubectl would: a misspelt or misplaced field, a wrong kind or apiVersion,
// a missing required field (checked below), a value of the wrong type.

type object struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
}

type objectMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type podTemplate struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     podSpec    `yaml:"spec"`
}

type podSpec struct {
	RestartPolicy   string `yaml:"restartPolicy"`
	SecurityContext struct {
		RunAsNonRoot bool  `yaml:"runAsNonRoot"`
		RunAsUser    int64 `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
}

type container struct {
	Name            string   `yaml:"name"`
	Image           string   `yaml:"image"`
	ImagePullPolicy string   `yaml:"imagePullPolicy"`
	Args            []string `yaml:"args"`
	Env             []envVar `yaml:"env"`
	Ports           []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	PeriodSeconds int `yaml:"periodSeconds"`
}

type namespace struct {
	object `yaml:",inline"`
}

type deployment struct {
	object `yaml:",inline"`
	Spec   struct {
		Replicas int           `yaml:"replicas"`
		Selector labelSelector `yaml:"selector"`
		Template podTemplate   `yaml:"template"`
	} `yaml:"spec"`
}

type job struct {
	object `yaml:",inline"`
	Spec   struct {
		CompletionMode string      `yaml:"completionMode"`
		Completions    int         `yaml:"completions"`
		Parallelism    int         `yaml:"parallelism"`
		BackoffLimit   int         `yaml:"backoffLimit"`
		Template       podTemplate `yaml:"template"`
	} `yaml:"spec"`
}

type service struct {
	object `yaml:",inline"`
	Spec   struct {
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type podMonitor struct {
	object `yaml:",inline"`
	Spec   struct {
		JobLabel            string        `yaml:"jobLabel"`
		Selector            labelSelector `yaml:"selector"`
		PodMetricsEndpoints []struct {
			Port          string `yaml:"port"`
			Path          string `yaml:"path"`
			Interval      string `yaml:"interval"`
			Authorization struct {
				Type        string `yaml:"type"`
				Credentials struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"credentials"`
			} `yaml:"authorization"`
			Relabelings []struct {
				SourceLabels []string `yaml:"sourceLabels"`
				TargetLabel  string   `yaml:"targetLabel"`
				Replacement  string   `yaml:"replacement"`
			} `yaml:"relabelings"`
		} `yaml:"podMetricsEndpoints"`
	} `yaml:"spec"`
}

// The kinds the manifests may hold, each at its one apiVersion.
var kinds = map[string]struct {
	apiVersion string
	decode     func(*yaml.Node) (any, error)
}{
	"Namespace":  {"v1", decodeAs[namespace]},
	"Deployment": {"apps/v1", decodeAs[deployment]},
	"Job":        {"batch/v1", decodeAs[job]},
	"Service":    {"v1", decodeAs[service]},
	"PodMonitor": {"monitoring.coreos.com/v1", decodeAs[podMonitor]},
}

// decodeAs decodes node into a T, refusing fields T does not have.
func decodeAs[T any](node *yaml.Node) (any, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(node); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	var v T
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return &v, nil
}

// manifests decodes every object in deploy/kubernetes strictly.
func manifests(t *testing.T) map[string][]any {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if len(files) < 3 {
		t.Fatalf("found %v, want the agents, the fleet Job and the PodMonitor", files)
	}
	out := map[string][]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 1; ; i++ {
			var node yaml.Node
			err := dec.Decode(&node)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			var head object
			if err := node.Decode(&head); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			k, ok := kinds[head.Kind]
			if !ok {
				t.Errorf("%s document %d: kind %q is not one this test knows", f, i, head.Kind)
				continue
			}
			if head.APIVersion != k.apiVersion {
				t.Errorf("%s %s: apiVersion %q, want %q", f, head.Kind, head.APIVersion, k.apiVersion)
			}
			if head.Metadata.Name == "" {
				t.Errorf("%s document %d: a %s without metadata.name", f, i, head.Kind)
			}
			obj, err := k.decode(&node)
			if err != nil {
				t.Errorf("%s %s %s: %v", f, head.Kind, head.Metadata.Name, err)
				continue
			}
			out[head.Kind] = append(out[head.Kind], obj)
		}
	}
	return out
}

func TestManifestsAreKubernetesObjects(t *testing.T) {
	objs := manifests(t)
	for _, kind := range []string{"Namespace", "Deployment", "Job", "Service", "PodMonitor"} {
		if len(objs[kind]) == 0 {
			t.Errorf("no %s in deploy/kubernetes", kind)
		}
	}
	for _, o := range objs["Deployment"] {
		d := o.(*deployment)
		checkAgentPod(t, "Deployment "+d.Metadata.Name, d.Spec.Template)
		if !subset(d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) {
			t.Errorf("Deployment %s: its selector %v does not select its pods %v", d.Metadata.Name, d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels)
		}
	}
	for _, o := range objs["Service"] {
		s := o.(*service)
		if len(s.Spec.Selector) == 0 || len(s.Spec.Ports) == 0 {
			t.Errorf("Service %s: no selector or no ports", s.Metadata.Name)
		}
	}
	for _, o := range objs["PodMonitor"] {
		pm := o.(*podMonitor)
		if len(pm.Spec.PodMetricsEndpoints) == 0 || pm.Spec.PodMetricsEndpoints[0].Authorization.Credentials.Name != "latscope-agent-token" {
			t.Errorf("PodMonitor %s: no endpoint scraped with the agents' token", pm.Metadata.Name)
		}
	}
}

// Each pod of the fleet Job takes its shard from its completion index, and
// N in --shard i/N is the Job's size.
func TestFleetJobShardsByCompletionIndex(t *testing.T) {
	jobs := manifests(t)["Job"]
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs, want the fleet's one", len(jobs))
	}
	j := jobs[0].(*job)
	if j.Spec.CompletionMode != "Indexed" || j.Spec.Completions < 2 || j.Spec.Parallelism != j.Spec.Completions {
		t.Fatalf("Job %s: completionMode %q, completions %d, parallelism %d; want Indexed, all pods at once",
			j.Metadata.Name, j.Spec.CompletionMode, j.Spec.Completions, j.Spec.Parallelism)
	}
	if j.Spec.Template.Spec.RestartPolicy != "Never" && j.Spec.Template.Spec.RestartPolicy != "OnFailure" {
		t.Errorf("Job %s: restartPolicy %q is not one a Job allows", j.Metadata.Name, j.Spec.Template.Spec.RestartPolicy)
	}
	c := checkAgentPod(t, "Job "+j.Metadata.Name, j.Spec.Template)
	want := fmt.Sprintf("--shard=$(JOB_COMPLETION_INDEX)/%d", j.Spec.Completions)
	if !slices.Contains(c.Args, want) {
		t.Errorf("Job %s: args %v lack %s", j.Metadata.Name, c.Args, want)
	}
	for _, flag := range []string{"--seed=", "--start-at="} {
		if !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, flag) }) {
			t.Errorf("Job %s: no %s: the shards would not send one schedule together", j.Metadata.Name, flag)
		}
	}
}

var envRef = regexp.MustCompile(`\$\(([A-Z_]+)\)`)

// checkAgentPod checks what every agent pod needs: the token from the
// Secret, the scrape annotations, and every $(VAR) in its arguments
// defined (or, JOB_COMPLETION_INDEX, set by an Indexed Job).
func checkAgentPod(t *testing.T, what string, tmpl podTemplate) container {
	t.Helper()
	if len(tmpl.Spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want the agent", what, len(tmpl.Spec.Containers))
	}
	c := tmpl.Spec.Containers[0]
	if c.Image == "" || len(c.Args) == 0 || c.Args[0] != "agent" {
		t.Errorf("%s: image %q, args %v: want latscope agent", what, c.Image, c.Args)
	}
	defined := map[string]bool{"JOB_COMPLETION_INDEX": strings.HasPrefix(what, "Job ")}
	token := false
	for _, e := range c.Env {
		defined[e.Name] = true
		if e.Name == "LATSCOPE_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
			token = true
		}
	}
	if !token {
		t.Errorf("%s: LATSCOPE_TOKEN does not come from a Secret", what)
	}
	for _, a := range c.Args {
		for _, m := range envRef.FindAllStringSubmatch(a, -1) {
			if !defined[m[1]] {
				t.Errorf("%s: argument %q uses $(%s), which the container does not define", what, a, m[1])
			}
		}
	}
	if tmpl.Metadata.Annotations["prometheus.io/scrape"] != "true" {
		t.Errorf("%s: no prometheus.io/scrape annotation", what)
	}
	if tmpl.Metadata.Labels["latscope.dev/region"] == "" {
		t.Errorf("%s: no latscope.dev/region label for the region the rules group by", what)
	}
	return c
}

func subset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return len(sub) > 0
}
