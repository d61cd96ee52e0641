// Package check renders the sudoku-queue Helm chart (deploy/helm) with the
// Helm v4 library, as `helm template` does, and validates what it renders
// offline: every Kubernetes object strictly against the API types of
// k8s.io/api (an unknown field, a duplicate key or an unknown kind is an
// error), KEDA's ScaledObject against KEDA's own CRD schema (bundled in
// testdata/keda), and the references between the objects (selectors,
// named ports, volumes, ConfigMaps). Its tests run it on several value
// sets and assert how the chart behaves; see chart_test.go.
package check

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/yaml"
)

// The release name, namespace and Kubernetes version the chart is
// rendered with. KubeVersion is the oldest the chart supports (its
// kubeVersion); the objects are checked against the API types of
// k8s.io/api, a newer release, so a field added after it would pass.
const (
	ReleaseName = "sq"
	Namespace   = "sudoku"
	KubeVersion = "v1.29.0"
)

// Doc is one rendered YAML document: a Kubernetes object.
type Doc struct {
	// Source is the template it came from (sudoku-queue/templates/worker.yaml).
	Source string
	// YAML is the document as rendered.
	YAML string
	// Object is the document decoded as JSON into generic maps.
	Object map[string]any
}

// Kind returns the document's kind.
func (d Doc) Kind() string { s, _ := d.Object["kind"].(string); return s }

// APIVersion returns the document's apiVersion.
func (d Doc) APIVersion() string { s, _ := d.Object["apiVersion"].(string); return s }

// Name returns the document's metadata.name.
func (d Doc) Name() string {
	m, _ := d.Object["metadata"].(map[string]any)
	s, _ := m["name"].(string)
	return s
}

// Rendered is what the chart renders for one set of values.
type Rendered struct {
	// Docs are the objects, in Helm's install order.
	Docs []Doc
	// Notes is the rendered NOTES.txt.
	Notes string
	// Values are the values the templates saw (the chart's defaults
	// coalesced with the ones given).
	Values map[string]any
}

// Find returns the document of that kind and name, or nil.
func (r *Rendered) Find(kind, name string) *Doc {
	for i := range r.Docs {
		if r.Docs[i].Kind() == kind && r.Docs[i].Name() == name {
			return &r.Docs[i]
		}
	}
	return nil
}

// OfKind returns the documents of that kind.
func (r *Rendered) OfKind(kind string) []Doc {
	var out []Doc
	for _, d := range r.Docs {
		if d.Kind() == kind {
			out = append(out, d)
		}
	}
	return out
}

// Render loads the chart in dir and renders it with vals over its
// defaults, the way `helm template` does without a cluster: the values are
// checked against values.schema.json, the chart's kubeVersion against
// Helm's default capabilities, the templates rendered strictly (a missing
// value is an error, as in `helm lint`), and the output split and sorted
// by Helm's manifest sorter, which also refuses malformed hook annotations.
func Render(dir string, vals map[string]any) (*Rendered, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	caps := common.DefaultCapabilities.Copy()
	kv, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	if kv := ch.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion %s, incompatible with Kubernetes %s", kv, caps.KubeVersion.Version)
	}
	if err := chartutil.ProcessDependencies(ch, vals); err != nil {
		return nil, fmt.Errorf("dependencies: %w", err)
	}
	opts := common.ReleaseOptions{Name: ReleaseName, Namespace: Namespace, Revision: 1, IsInstall: true}
	top, err := util.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, false)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{Strict: true}.Render(ch, top)
	if err != nil {
		return nil, err
	}
	out := &Rendered{}
	if v, ok := top["Values"].(common.Values); ok {
		out.Values = v.AsMap()
	}
	notes := path.Join(ch.Name(), "templates", "NOTES.txt")
	out.Notes = files[notes]
	delete(files, notes)
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sort manifests: %w", err)
	}
	for _, h := range hooks {
		manifests = append(manifests, releaseutil.Manifest{Name: h.Path, Content: h.Manifest})
	}
	// Each manifest is one YAML document.
	for _, m := range manifests {
		j, err := yaml.YAMLToJSONStrict([]byte(m.Content))
		if err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", m.Name, err, m.Content)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(j, &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if obj == nil {
			continue
		}
		out.Docs = append(out.Docs, Doc{Source: m.Name, YAML: m.Content, Object: obj})
	}
	return out, nil
}

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid")

// Errors collects validation errors, each prefixed with the object it is
// about.
type Errors []string

// Addf adds an error about d.
func (e *Errors) Addf(d Doc, format string, args ...any) {
	*e = append(*e, fmt.Sprintf("%s %s (%s): %s", d.Kind(), d.Name(), d.Source, fmt.Sprintf(format, args...)))
}

// Err returns the errors as one error, or nil.
func (e Errors) Err() error {
	if len(e) == 0 {
		return nil
	}
	s := append([]string(nil), e...)
	sort.Strings(s)
	return fmt.Errorf("%w: %d problem(s):\n  %s", ErrInvalid, len(s), strings.Join(s, "\n  "))
}
