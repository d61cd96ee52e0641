package check

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart, from this folder.
var chartDir = filepath.Join("..", "helm", "sudoku-queue")

// valueSet is one set of values to render, and what to assert of it
// beyond what every set must hold (checkInvariants).
type valueSet struct {
	name   string
	values string // YAML, over the chart's defaults
	check  func(t *testing.T, r *Rendered)
}

var valueSets = []valueSet{
	{name: "defaults", check: func(t *testing.T, r *Rendered) {
		wantKinds(t, r, map[string]int{"StatefulSet": 1, "Deployment": 3, "Service": 4, "ConfigMap": 2, "Job": 1, "ScaledObject": 0, "PodDisruptionBudget": 0, "Secret": 0})
		w := deployment(t, r, "sq-sudoku-queue-worker")
		if w.Spec.Replicas == nil || *w.Spec.Replicas != 2 {
			t.Errorf("worker replicas = %v, want 2 (worker.replicas) without KEDA", w.Spec.Replicas)
		}
		nats := statefulSet(t, r, "sq-sudoku-queue-nats")
		if *nats.Spec.Replicas != 1 || len(nats.Spec.VolumeClaimTemplates) != 1 {
			t.Errorf("nats: replicas %d, %d claim templates; want 1 and 1", *nats.Spec.Replicas, len(nats.Spec.VolumeClaimTemplates))
		}
		if conf := natsConf(t, r); strings.Contains(conf, "cluster {") || strings.Contains(conf, "include") {
			t.Errorf("one NATS server has no cluster block and, without roles, no users:\n%s", conf)
		}
		if !strings.Contains(r.Notes, "WARNING: roles are off") {
			t.Errorf("NOTES do not warn that roles are off:\n%s", r.Notes)
		}
		for _, c := range sudokuContainers(t, r) {
			if env(c.c, "SUDOKU_NATS_USER") != "" {
				t.Errorf("%s: a NATS user without roles", c.where)
			}
		}
	}},
	{name: "roles", values: "roles: {enabled: true}", check: func(t *testing.T, r *Rendered) {
		// Each component connects as its own user, with its own Secret.
		want := map[string][2]string{
			"worker": {"worker", "sudoku-roles-worker"},
			"serve":  {"gateway", "sudoku-roles-gateway"},
			"setup":  {"admin", "sudoku-roles-admin"},
		}
		for _, c := range sudokuContainers(t, r) {
			w := want[c.c.Name]
			if got := env(c.c, "SUDOKU_NATS_USER"); got != w[0] {
				t.Errorf("%s: SUDOKU_NATS_USER %q, want %q", c.where, got, w[0])
			}
			if got := env(c.c, "SUDOKU_REDIS_USERNAME"); got != w[0] {
				t.Errorf("%s: SUDOKU_REDIS_USERNAME %q, want %q", c.where, got, w[0])
			}
			files := []string{"SUDOKU_NATS_PASSWORD_FILE", "SUDOKU_REDIS_PASSWORD_FILE"}
			// The worker signs its answers with the key of its Secret;
			// serve trusts the workers' keys of its own; setup neither.
			proofs := map[string]string{"worker": "SUDOKU_PROOF_KEY", "serve": "SUDOKU_PROOF_TRUSTED"}
			for _, k := range []string{"SUDOKU_PROOF_KEY", "SUDOKU_PROOF_TRUSTED"} {
				switch got := env(c.c, k); {
				case proofs[c.c.Name] == k && got == "":
					t.Errorf("%s: no %s", c.where, k)
				case proofs[c.c.Name] == k:
					files = append(files, k)
				case got != "":
					t.Errorf("%s: %s %q, want none", c.where, k, got)
				}
			}
			for _, k := range files {
				if s := secretOf(c.pod, c.c, env(c.c, k)); s != w[1] {
					t.Errorf("%s: %s %q is not a file of Secret %s (got %q)", c.where, k, env(c.c, k), w[1], s)
				}
			}
		}
		if conf := natsConf(t, r); !strings.Contains(conf, `include "users/nats-users.conf"`) {
			t.Errorf("NATS does not include the users:\n%s", conf)
		}
		nats := statefulSet(t, r, "sq-sudoku-queue-nats")
		if !projectsSecret(&nats.Spec.Template.Spec, "sudoku-roles-server", "nats-users.conf", "users/nats-users.conf") {
			t.Errorf("NATS pods do not get users/nats-users.conf from Secret sudoku-roles-server")
		}
		redis := deployment(t, r, "sq-sudoku-queue-redis")
		args := strings.Join(redis.Spec.Template.Spec.Containers[0].Args, " ")
		if !strings.Contains(args, "--aclfile /etc/redis-roles/redis-users.acl") {
			t.Errorf("redis args %q have no --aclfile", args)
		}
		if s := secretOf(&redis.Spec.Template.Spec, &redis.Spec.Template.Spec.Containers[0], "/etc/redis-roles/redis-users.acl"); s != "sudoku-roles-server" {
			t.Errorf("the ACL file is not from Secret sudoku-roles-server (%q)", s)
		}
		if strings.Contains(r.Notes, "WARNING") {
			t.Errorf("NOTES warn with roles on:\n%s", r.Notes)
		}
	}},
	{name: "roles without proofs", values: "roles: {enabled: true, proof: false}", check: func(t *testing.T, r *Rendered) {
		for _, c := range sudokuContainers(t, r) {
			for _, k := range []string{"SUDOKU_PROOF_KEY", "SUDOKU_PROOF_TRUSTED"} {
				if got := env(c.c, k); got != "" {
					t.Errorf("%s: %s %q with roles.proof false", c.where, k, got)
				}
			}
		}
	}},
	{name: "nats3", values: "nats: {replicas: 3}", check: func(t *testing.T, r *Rendered) {
		nats := statefulSet(t, r, "sq-sudoku-queue-nats")
		if *nats.Spec.Replicas != 3 || nats.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("nats: replicas %d, policy %q; want 3, Parallel (a server is ready only with a quorum)", *nats.Spec.Replicas, nats.Spec.PodManagementPolicy)
		}
		conf := natsConf(t, r)
		for i := range 3 {
			route := fmt.Sprintf(`"nats://sq-sudoku-queue-nats-%d.sq-sudoku-queue-nats-headless:6222"`, i)
			if !strings.Contains(conf, route) {
				t.Errorf("nats.conf has no route %s:\n%s", route, conf)
			}
		}
		var hs corev1.Service
		decodeAs(t, r, "Service", "sq-sudoku-queue-nats-headless", &hs)
		if hs.Spec.ClusterIP != "None" || !hs.Spec.PublishNotReadyAddresses {
			t.Errorf("headless Service: clusterIP %q, publishNotReadyAddresses %v", hs.Spec.ClusterIP, hs.Spec.PublishNotReadyAddresses)
		}
		var pdb policyv1.PodDisruptionBudget
		decodeAs(t, r, "PodDisruptionBudget", "sq-sudoku-queue-nats", &pdb)
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PDB maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
		}
		if got := sudokuConfig(t, r)["queue"].(map[string]any)["replicas"]; got != float64(3) {
			t.Errorf("queue.replicas = %v, want 3 with 3 NATS servers", got)
		}
	}},
	{name: "keda", values: "keda: {enabled: true}", check: func(t *testing.T, r *Rendered) {
		so := r.Find("ScaledObject", "sq-sudoku-queue-worker")
		if so == nil {
			t.Fatal("no ScaledObject with keda.enabled")
		}
		var s struct {
			Spec struct {
				ScaleTargetRef                   struct{ APIVersion, Kind, Name string }
				MinReplicaCount, MaxReplicaCount *int
				Triggers                         []struct {
					Type     string
					Metadata map[string]string
				}
			}
		}
		if err := yaml.Unmarshal([]byte(so.YAML), &s); err != nil {
			t.Fatal(err)
		}
		if ref := s.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != "sq-sudoku-queue-worker" {
			t.Errorf("scaleTargetRef %+v is not the worker Deployment", ref)
		}
		if s.Spec.MinReplicaCount == nil || *s.Spec.MinReplicaCount != 0 {
			t.Errorf("minReplicaCount %v, want 0 (scale to zero)", s.Spec.MinReplicaCount)
		}
		if s.Spec.MaxReplicaCount == nil || *s.Spec.MaxReplicaCount != 32 {
			t.Errorf("maxReplicaCount %v, want 32 (keda.maxReplicaCount)", s.Spec.MaxReplicaCount)
		}
		if len(s.Spec.Triggers) != 1 || s.Spec.Triggers[0].Type != "prometheus" {
			t.Fatalf("triggers %+v, want one prometheus trigger", s.Spec.Triggers)
		}
		if q := s.Spec.Triggers[0].Metadata["query"]; q != "sum(sudoku_backlog_lines)" {
			t.Errorf("query %q, want sum(sudoku_backlog_lines)", q)
		}
		// The HPA owns the replicas: a Deployment that set them would fight it.
		if w := deployment(t, r, "sq-sudoku-queue-worker"); w.Spec.Replicas != nil {
			t.Errorf("worker Deployment sets replicas (%d) under KEDA", *w.Spec.Replicas)
		}
		// The gauge comes from serve, which Prometheus must scrape.
		serve := deployment(t, r, "sq-sudoku-queue-serve")
		if a := serve.Spec.Template.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("serve pods are not marked for scraping: %v", a)
		}
	}},
	{name: "serve-off", values: "serve: {enabled: false}", check: func(t *testing.T, r *Rendered) {
		if r.Find("Deployment", "sq-sudoku-queue-serve") != nil || r.Find("Service", "sq-sudoku-queue-serve") != nil {
			t.Error("serve is rendered with serve.enabled false")
		}
		deployment(t, r, "sq-sudoku-queue-worker")
	}},
	{name: "everything", values: `
roles: {enabled: true}
nats: {replicas: 3, persistence: {storageClassName: fast}}
keda: {enabled: true, minReplicaCount: 1, maxReplicaCount: 64}
serve: {tokenSecret: {name: sudoku-api-token}, service: {type: LoadBalancer}}
config: {job: {result_ttl: 72h}, queue: {batch_size: 2048}}
worker:
  shutdownTimeoutSeconds: 60
  extraEnv:
    - {name: SUDOKU_LOG_LEVEL, value: debug}
    - name: SUDOKU_SERVE_TOKEN
      valueFrom: {secretKeyRef: {name: sudoku-api-token, key: token}}
`, check: func(t *testing.T, r *Rendered) {
		cfg := sudokuConfig(t, r)
		if cfg["job"].(map[string]any)["result_ttl"] != "72h" || cfg["queue"].(map[string]any)["replicas"] != float64(3) {
			t.Errorf("config does not merge the operator's keys over the derived ones: %v", cfg)
		}
		w := deployment(t, r, "sq-sudoku-queue-worker")
		if g := *w.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 75 {
			t.Errorf("terminationGracePeriodSeconds %d, want 75 (60 + 15)", g)
		}
		serve := deployment(t, r, "sq-sudoku-queue-serve")
		c := &serve.Spec.Template.Spec.Containers[0]
		if s := secretOf(&serve.Spec.Template.Spec, c, env(c, "SUDOKU_SERVE_TOKEN_FILE")); s != "sudoku-api-token" {
			t.Errorf("SUDOKU_SERVE_TOKEN_FILE is not a file of Secret sudoku-api-token (%q)", s)
		}
	}},
	{name: "external", values: `
nats: {enabled: false, external: {url: "nats://nats.infra:4222"}}
redis: {enabled: false, external: {addrs: ["redis-0.infra:6379", "redis-1.infra:6379"]}}
`, check: func(t *testing.T, r *Rendered) {
		wantKinds(t, r, map[string]int{"StatefulSet": 0, "Deployment": 2, "Service": 1, "ConfigMap": 1})
		cfg := sudokuConfig(t, r)
		if cfg["nats"].(map[string]any)["url"] != "nats://nats.infra:4222" || len(cfg["redis"].(map[string]any)["addrs"].([]any)) != 2 {
			t.Errorf("config does not use the external servers: %v", cfg)
		}
	}},
}

// externalSecrets are the Secrets the operator makes (named in values).
func externalSecrets(v map[string]any) map[string]bool {
	out := map[string]bool{}
	roles := v["roles"].(map[string]any)
	out[roles["serverSecret"].(string)] = true
	for _, c := range []string{"worker", "serve", "setup"} {
		out[roles[c].(map[string]any)["secret"].(string)] = true
	}
	if n, _ := v["serve"].(map[string]any)["tokenSecret"].(map[string]any)["name"].(string); n != "" {
		out[n] = true
	}
	return out
}

func render(t *testing.T, values string) *Rendered {
	t.Helper()
	vals := map[string]any{}
	mustUnmarshal(t, values, &vals)
	r, err := Render(chartDir, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

// TestValueSets renders each value set, validates every object, and
// checks what every set must hold and what the set itself is for.
func TestValueSets(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := render(t, vs.values)
			if err := Validate(r, externalSecrets(r.Values)); err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, r)
			vs.check(t, r)
		})
	}
}

// secretName matches environment variables that would hold a secret.
var secretName = regexp.MustCompile(`(?i)(PASSWORD|TOKEN|SECRET)$`)

// checkInvariants checks what every value set must hold.
func checkInvariants(t *testing.T, r *Rendered) {
	t.Helper()
	cfg := sudokuConfig(t, r)
	// No secret in any ConfigMap: the sudoku file has no secret key, and
	// no ConfigMap has a password or token setting at all.
	for _, k := range [][2]string{{"nats", "password"}, {"nats", "token"}, {"redis", "password"}, {"serve", "token"}} {
		if sec, ok := cfg[k[0]].(map[string]any); ok && sec[k[1]] != nil {
			t.Errorf("the sudoku ConfigMap holds %s.%s", k[0], k[1])
		}
	}
	for _, d := range r.OfKind("ConfigMap") {
		if m := regexp.MustCompile(`(?im)^\s*(password|pass|token)\s*[:=]`).FindString(d.YAML); m != "" {
			t.Errorf("ConfigMap %s has a secret setting: %q", d.Name(), m)
		}
	}
	for _, d := range r.OfKind("Secret") {
		t.Errorf("the chart renders Secret %s: secrets are the operator's", d.Name())
	}
	// Every sudoku container reads the file, takes no secret from a plain
	// value, and finds every *_FILE it is given in a mounted Secret.
	for _, c := range sudokuContainers(t, r) {
		if env(c.c, "SUDOKU_CONFIG") != "/etc/sudoku-chart/sudoku.yaml" || mountOf(c.c, "/etc/sudoku-chart/sudoku.yaml") == nil {
			t.Errorf("%s does not read the chart's configuration", c.where)
		}
		for _, e := range c.c.Env {
			if secretName.MatchString(e.Name) && e.Value != "" {
				t.Errorf("%s: %s has a value in the pod spec; a secret must come from a file or a secretKeyRef", c.where, e.Name)
			}
			if strings.HasSuffix(e.Name, "_FILE") && secretOf(c.pod, c.c, e.Value) == "" {
				t.Errorf("%s: %s=%s is not a file of a mounted Secret", c.where, e.Name, e.Value)
			}
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && secretName.MatchString(e.Name) {
				t.Errorf("%s: %s comes from a ConfigMap", c.where, e.Name)
			}
		}
	}
	// No pod runs as root or may gain privileges.
	for _, d := range r.Docs {
		var pod *corev1.PodSpec
		switch d.Kind() {
		case "Deployment":
			pod = &deployment(t, r, d.Name()).Spec.Template.Spec
		case "StatefulSet":
			pod = &statefulSet(t, r, d.Name()).Spec.Template.Spec
		case "Job":
			var j batchv1.Job
			decodeAs(t, r, "Job", d.Name(), &j)
			pod = &j.Spec.Template.Spec
		default:
			continue
		}
		if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("%s %s may run as root", d.Kind(), d.Name())
		}
		for _, c := range pod.Containers {
			if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s %s: container %s may gain privileges", d.Kind(), d.Name(), c.Name)
			}
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("%s %s mounts a service account token it does not need", d.Kind(), d.Name())
		}
	}
	// The workers: probes on the metrics port, room to drain.
	if d := r.Find("Deployment", "sq-sudoku-queue-worker"); d != nil {
		w := deployment(t, r, d.Name())
		c := w.Spec.Template.Spec.Containers[0]
		if strings.Join(c.Args[:3], " ") != "worker --metrics-addr 0.0.0.0:9090" {
			t.Errorf("worker args %q", c.Args)
		}
		probe := func(what string, p *corev1.Probe, path string) {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("worker has no HTTP %s probe", what)
				return
			}
			if p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "metrics" || len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9090 {
				t.Errorf("worker %s probe is %s on port %s (ports %v), want %s on metrics (9090)", what, p.HTTPGet.Path, p.HTTPGet.Port.String(), c.Ports, path)
			}
		}
		probe("readiness", c.ReadinessProbe, "/readyz")
		probe("liveness", c.LivenessProbe, "/healthz")
		timeout := cfg["worker"].(map[string]any)["shutdown_timeout"].(string)
		var secs int64
		fmt.Sscanf(timeout, "%ds", &secs)
		if g := w.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < secs+10 {
			t.Errorf("terminationGracePeriodSeconds %d leaves no room for worker.shutdown_timeout %s", ptrOr(g, 30), timeout)
		}
	} else {
		t.Error("no worker Deployment")
	}
	if d := r.Find("Deployment", "sq-sudoku-queue-serve"); d != nil {
		c := deployment(t, r, d.Name()).Spec.Template.Spec.Containers[0]
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("serve probes: readiness %v, liveness %v", c.ReadinessProbe, c.LivenessProbe)
		}
	}
	// The queue keeps as many replicas as there are NATS servers.
	if nats := r.Find("StatefulSet", "sq-sudoku-queue-nats"); nats != nil {
		n := *statefulSet(t, r, nats.Name()).Spec.Replicas
		if got := cfg["queue"].(map[string]any)["replicas"]; got != float64(n) {
			t.Errorf("queue.replicas %v with %d NATS servers", got, n)
		}
	}
}

// TestSchemaRejects checks that values.schema.json refuses bad values
// before anything renders.
func TestSchemaRejects(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"nats: {replicas: 2}", "replicas"},
		{"wokrer: {replicas: 2}", "wokrer"},
		{"worker: {replicas: -1}", "replicas"},
		{"worker: {replicas: two}", "replicas"},
		{"keda: {prometheus: {threshold: 50000}}", "threshold"},
		{"keda: {minReplicaCount: -1}", "minReplicaCount"},
		{"redis: {maxmemory: lots}", "maxmemory"},
		{"config: {nats: {password: hunter2}}", "/config/nats/password"},
		{"config: {serve: {token: hunter2}}", "/config/serve/token"},
		{"worker: {extraEnv: [{name: SUDOKU_REDIS_PASSWORD, value: hunter2}]}", "extraEnv"},
		{"roles: {worker: {user: root, secret: s}}", "user"},
		{"image: {tag: ''}", "tag"},
	} {
		vals := map[string]any{}
		mustUnmarshal(t, tc.values, &vals)
		_, err := Render(chartDir, vals)
		if err == nil {
			t.Errorf("%s: rendered, want the schema to refuse it", tc.values)
			continue
		}
		t.Logf("%s: %v", tc.values, err)
		if !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a schema error naming %q", tc.values, err, tc.want)
		}
	}
}

// TestTemplateRefuses checks the values the schema lets through and the
// templates refuse.
func TestTemplateRefuses(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"keda: {enabled: true}\nserve: {replicas: 2}", "once per serve replica"},
		{"keda: {enabled: true, minReplicaCount: 5, maxReplicaCount: 2}", "minReplicaCount"},
		{"nats: {enabled: false}", "nats.external.url"},
		{"redis: {enabled: false}", "redis.external.addrs"},
	} {
		vals := map[string]any{}
		mustUnmarshal(t, tc.values, &vals)
		_, err := Render(chartDir, vals)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", strings.ReplaceAll(tc.values, "\n", "; "), err, tc.want)
		}
	}
}

// TestValidateCatches checks that the validation fails on objects broken
// the ways a template can break them.
func TestValidateCatches(t *testing.T) {
	for _, tc := range []struct {
		name, kind, obj, want string
		edit                  func(o map[string]any)
	}{
		{"unknown field", "Deployment", "sq-sudoku-queue-worker", "unknown field", func(o map[string]any) {
			o["spec"].(map[string]any)["replica"] = 2
		}},
		{"bad quantity", "Deployment", "sq-sudoku-queue-worker", "quantities", func(o map[string]any) {
			c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			c["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "lots"
		}},
		{"unknown kind", "Service", "sq-sudoku-queue-serve", "unknown apiVersion/kind", func(o map[string]any) {
			o["kind"] = "Servcie"
		}},
		{"selector", "Deployment", "sq-sudoku-queue-serve", "does not match", func(o map[string]any) {
			o["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)["app.kubernetes.io/component"] = "other"
		}},
		{"probe port", "Deployment", "sq-sudoku-queue-worker", "probe names port", func(o map[string]any) {
			c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			c["readinessProbe"].(map[string]any)["httpGet"].(map[string]any)["port"] = "metric"
		}},
		{"ScaledObject field", "ScaledObject", "sq-sudoku-queue-worker", "additional properties", func(o map[string]any) {
			o["spec"].(map[string]any)["minReplicas"] = 0
		}},
		{"ScaledObject trigger", "ScaledObject", "sq-sudoku-queue-worker", "metadata", func(o map[string]any) {
			delete(o["spec"].(map[string]any)["triggers"].([]any)[0].(map[string]any), "metadata")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, "keda: {enabled: true}")
			d := r.Find(tc.kind, tc.obj)
			if d == nil {
				t.Fatalf("no %s %s", tc.kind, tc.obj)
			}
			tc.edit(d.Object)
			err := Validate(r, externalSecrets(r.Values))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// Helpers.

// ptrOr returns *p, or def when p is nil (the API's default).
func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func mustUnmarshal(t *testing.T, s string, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(s), v); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
}

func wantKinds(t *testing.T, r *Rendered, want map[string]int) {
	t.Helper()
	for k, n := range want {
		if got := len(r.OfKind(k)); got != n {
			t.Errorf("%d %s, want %d", got, k, n)
		}
	}
}

func decodeAs(t *testing.T, r *Rendered, kind, name string, into any) {
	t.Helper()
	d := r.Find(kind, name)
	if d == nil {
		t.Fatalf("no %s %s", kind, name)
	}
	mustUnmarshal(t, d.YAML, into)
}

func deployment(t *testing.T, r *Rendered, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	decodeAs(t, r, "Deployment", name, &d)
	return &d
}

func statefulSet(t *testing.T, r *Rendered, name string) *appsv1.StatefulSet {
	t.Helper()
	var s appsv1.StatefulSet
	decodeAs(t, r, "StatefulSet", name, &s)
	return &s
}

func natsConf(t *testing.T, r *Rendered) string {
	t.Helper()
	var cm corev1.ConfigMap
	decodeAs(t, r, "ConfigMap", "sq-sudoku-queue-nats-config", &cm)
	return cm.Data["nats.conf"]
}

func sudokuConfig(t *testing.T, r *Rendered) map[string]any {
	t.Helper()
	var cm corev1.ConfigMap
	decodeAs(t, r, "ConfigMap", "sq-sudoku-queue-config", &cm)
	cfg := map[string]any{}
	mustUnmarshal(t, cm.Data["sudoku.yaml"], &cfg)
	return cfg
}

// container is a sudoku container of a rendered workload.
type container struct {
	where string
	pod   *corev1.PodSpec
	c     *corev1.Container
}

// sudokuContainers returns the containers that run the sudoku image.
func sudokuContainers(t *testing.T, r *Rendered) []container {
	t.Helper()
	img := fmt.Sprint(r.Values["image"].(map[string]any)["repository"], ":", r.Values["image"].(map[string]any)["tag"])
	var out []container
	for _, d := range r.Docs {
		var pod *corev1.PodSpec
		switch d.Kind() {
		case "Deployment":
			pod = &deployment(t, r, d.Name()).Spec.Template.Spec
		case "Job":
			var j batchv1.Job
			decodeAs(t, r, "Job", d.Name(), &j)
			pod = &j.Spec.Template.Spec
		default:
			continue
		}
		for i := range pod.Containers {
			if pod.Containers[i].Image == img {
				out = append(out, container{d.Kind() + " " + d.Name() + " container " + pod.Containers[i].Name, pod, &pod.Containers[i]})
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no sudoku container")
	}
	return out
}

func env(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// mountOf returns the mount of c that holds path.
func mountOf(c *corev1.Container, path string) *corev1.VolumeMount {
	for i, m := range c.VolumeMounts {
		if strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// secretOf returns the Secret whose key is the file at path in c, or "".
func secretOf(pod *corev1.PodSpec, c *corev1.Container, path string) string {
	m := mountOf(c, path)
	if m == nil || path == "" {
		return ""
	}
	file := strings.TrimPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
	for _, v := range pod.Volumes {
		if v.Name != m.Name || v.Secret == nil {
			continue
		}
		if len(v.Secret.Items) == 0 {
			return v.Secret.SecretName
		}
		for _, it := range v.Secret.Items {
			if it.Path == file {
				return v.Secret.SecretName
			}
		}
	}
	return ""
}

// projectsSecret says whether a projected volume of pod puts key of
// Secret name at path.
func projectsSecret(pod *corev1.PodSpec, name, key, path string) bool {
	for _, v := range pod.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.Secret == nil || s.Secret.Name != name {
				continue
			}
			for _, it := range s.Secret.Items {
				if it.Key == key && it.Path == path {
					return true
				}
			}
		}
	}
	return false
}
