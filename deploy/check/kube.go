package check

import (
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
)

// strict decodes JSON into the API types registered in client-go's scheme
// (every built-in group and version), refusing unknown and duplicate
// fields, the way the API server does with fieldValidation=Strict.
var strict = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	kjson.SerializerOptions{Strict: true})

// Decode decodes d strictly into its Kubernetes API type: an unknown
// apiVersion or kind, an unknown or duplicate field, or a value of the
// wrong type (a bad quantity, a string for a number) is an error.
func Decode(d Doc) (runtime.Object, error) {
	j, err := json.Marshal(d.Object)
	if err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(d.APIVersion())
	if err != nil {
		return nil, err
	}
	gvk := gv.WithKind(d.Kind())
	if !scheme.Scheme.Recognizes(gvk) {
		return nil, fmt.Errorf("unknown apiVersion/kind %s", gvk)
	}
	obj, _, err := strict.Decode(j, &gvk, nil)
	return obj, err
}

// Validate checks every document of r: Kubernetes objects by Decode and
// the checks below, ScaledObjects against KEDA's schema (ValidateScaledObject);
// any other kind is an error. external lists the Secrets the chart uses
// without making them (the operator's).
func Validate(r *Rendered, external map[string]bool) error {
	var errs Errors
	objs := map[*Doc]runtime.Object{}
	seen := map[string]bool{}
	for i := range r.Docs {
		d := &r.Docs[i]
		key := d.APIVersion() + "/" + d.Kind() + "/" + d.Name()
		if seen[key] {
			errs.Addf(*d, "rendered twice")
		}
		seen[key] = true
		checkMeta(&errs, *d)
		if d.APIVersion() == "keda.sh/v1alpha1" && d.Kind() == "ScaledObject" {
			if err := ValidateScaledObject(*d); err != nil {
				errs.Addf(*d, "%v", err)
			}
			continue
		}
		obj, err := Decode(*d)
		if err != nil {
			errs.Addf(*d, "%v", err)
			continue
		}
		objs[d] = obj
	}
	checkReferences(&errs, r, objs, external)
	return errs.Err()
}

// checkMeta checks the name, namespace, labels and annotations.
func checkMeta(errs *Errors, d Doc) {
	md, _ := d.Object["metadata"].(map[string]any)
	if md == nil {
		errs.Addf(d, "no metadata")
		return
	}
	var m metav1.ObjectMeta
	j, _ := json.Marshal(md)
	dec := json.NewDecoder(strings.NewReader(string(j)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		errs.Addf(d, "metadata: %v", err)
		return
	}
	if m.Namespace != "" {
		errs.Addf(d, "metadata.namespace is set (%q): helm install -n sets it", m.Namespace)
	}
	for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
		errs.Addf(d, "metadata.name %q: %s", m.Name, msg)
	}
	switch d.Kind() {
	case "Service":
		for _, msg := range validation.IsDNS1035Label(m.Name) {
			errs.Addf(d, "Service name %q: %s", m.Name, msg)
		}
	case "StatefulSet", "Deployment":
		// Pod names add a suffix, and a StatefulSet's pods are DNS labels.
		if len(m.Name) > 52 {
			errs.Addf(d, "name %q is too long for its pods' names", m.Name)
		}
	}
	for k, v := range m.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs.Addf(d, "label %q: %s", k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs.Addf(d, "label %s=%q: %s", k, v, msg)
		}
	}
	for k := range m.Annotations {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs.Addf(d, "annotation %q: %s", k, msg)
		}
	}
}

// workload is a rendered object with a pod template.
type workload struct {
	Doc      *Doc
	Selector *metav1.LabelSelector
	Template *corev1.PodTemplateSpec
	// Claims are the names of a StatefulSet's volume claim templates,
	// volumes of its pods too.
	Claims []string
}

// workloads returns the Deployments, StatefulSets and Jobs of objs.
func workloads(objs map[*Doc]runtime.Object) []workload {
	var out []workload
	for d, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			out = append(out, workload{d, o.Spec.Selector, &o.Spec.Template, nil})
		case *appsv1.StatefulSet:
			var claims []string
			for _, c := range o.Spec.VolumeClaimTemplates {
				claims = append(claims, c.Name)
			}
			out = append(out, workload{d, o.Spec.Selector, &o.Spec.Template, claims})
		case *batchv1.Job:
			out = append(out, workload{d, o.Spec.Selector, &o.Spec.Template, nil})
		}
	}
	return out
}

// checkReferences checks what the API server's validation would and a
// schema cannot: selectors match their pods, probes and Services name
// ports that exist, mounts name volumes that exist, ConfigMaps and
// Secrets used are rendered (or the operator's), environment variables
// have valid names.
func checkReferences(errs *Errors, r *Rendered, objs map[*Doc]runtime.Object, external map[string]bool) {
	configMaps, secrets := map[string]bool{}, map[string]bool{}
	for d, o := range objs {
		switch o.(type) {
		case *corev1.ConfigMap:
			configMaps[d.Name()] = true
		case *corev1.Secret:
			secrets[d.Name()] = true
		}
	}
	wls := workloads(objs)
	for _, w := range wls {
		d := *w.Doc
		if _, isJob := objs[w.Doc].(*batchv1.Job); !isJob || w.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(w.Selector)
			if err != nil || w.Selector == nil || sel.Empty() {
				errs.Addf(d, "spec.selector is missing or empty (%v)", err)
			} else if !sel.Matches(labels.Set(w.Template.Labels)) {
				errs.Addf(d, "spec.selector %s does not match the pod template's labels %v", sel, w.Template.Labels)
			}
		}
		checkPod(errs, d, &w.Template.Spec, w.Claims, configMaps, secrets, external)
	}
	for d, o := range objs {
		svc, ok := o.(*corev1.Service)
		if !ok {
			continue
		}
		if len(svc.Spec.Selector) == 0 {
			errs.Addf(*d, "no selector")
			continue
		}
		var pods []*corev1.PodTemplateSpec
		for _, w := range wls {
			if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.Template.Labels)) {
				pods = append(pods, w.Template)
			}
		}
		if len(pods) == 0 {
			errs.Addf(*d, "selector %v matches no pod of the chart", svc.Spec.Selector)
		}
		for _, p := range svc.Spec.Ports {
			for _, pod := range pods {
				if p.TargetPort.Type == intstr.String && !hasPort(&pod.Spec, p.TargetPort.StrVal) {
					errs.Addf(*d, "port %s: targetPort %q is no container port of its pods", p.Name, p.TargetPort.StrVal)
				}
			}
		}
	}
	if err := checkStatefulSets(objs); err != "" {
		*errs = append(*errs, err)
	}
}

// checkStatefulSets checks that each StatefulSet's serviceName is a
// rendered headless Service.
func checkStatefulSets(objs map[*Doc]runtime.Object) string {
	headless := map[string]bool{}
	for _, o := range objs {
		if s, ok := o.(*corev1.Service); ok && s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless[s.Name] = true
		}
	}
	for d, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok && !headless[s.Spec.ServiceName] {
			return fmt.Sprintf("StatefulSet %s: serviceName %q is no headless Service of the chart", d.Name(), s.Spec.ServiceName)
		}
	}
	return ""
}

func hasPort(spec *corev1.PodSpec, name string) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

// checkPod checks one pod template.
func checkPod(errs *Errors, d Doc, spec *corev1.PodSpec, claims []string, configMaps, secrets, external map[string]bool) {
	volumes := map[string]bool{}
	for _, c := range claims {
		volumes[c] = true
	}
	for _, v := range spec.Volumes {
		if volumes[v.Name] {
			errs.Addf(d, "volume %q twice", v.Name)
		}
		volumes[v.Name] = true
		useCM := func(name string) {
			if !configMaps[name] {
				errs.Addf(d, "volume %q: ConfigMap %q is not rendered", v.Name, name)
			}
		}
		useSecret := func(name string) {
			if !secrets[name] && !external[name] {
				errs.Addf(d, "volume %q: Secret %q is neither rendered nor the operator's", v.Name, name)
			}
		}
		switch {
		case v.ConfigMap != nil:
			useCM(v.ConfigMap.Name)
		case v.Secret != nil:
			useSecret(v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					useCM(s.ConfigMap.Name)
				}
				if s.Secret != nil {
					useSecret(s.Secret.Name)
				}
			}
		}
	}
	if len(spec.Containers) == 0 {
		errs.Addf(d, "no container")
	}
	all := append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...)
	for _, c := range all {
		if c.Name == "" || c.Image == "" {
			errs.Addf(d, "a container without a name or an image")
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				errs.Addf(d, "container %s mounts %q, which is no volume", c.Name, m.Name)
			}
		}
		for _, e := range c.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				errs.Addf(d, "container %s: env %q: %s", c.Name, e.Name, msg)
			}
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			if p.Name != "" {
				for _, msg := range validation.IsValidPortName(p.Name) {
					errs.Addf(d, "container %s: port %q: %s", c.Name, p.Name, msg)
				}
				ports[p.Name] = true
			}
		}
		for what, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
			if pr == nil {
				continue
			}
			var port *intstr.IntOrString
			switch {
			case pr.HTTPGet != nil:
				port = &pr.HTTPGet.Port
			case pr.TCPSocket != nil:
				port = &pr.TCPSocket.Port
			case pr.Exec != nil, pr.GRPC != nil:
			default:
				errs.Addf(d, "container %s: %s probe has no handler", c.Name, what)
			}
			if port != nil && port.Type == intstr.String && !ports[port.StrVal] {
				errs.Addf(d, "container %s: %s probe names port %q, which it does not have", c.Name, what, port.StrVal)
			}
		}
	}
}
