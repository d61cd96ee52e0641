package check

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

// scaledObjectCRD is KEDA's CustomResourceDefinition of ScaledObject
// (testdata/keda/README.md says where it comes from).
//
//go:embed testdata/keda/keda.sh_scaledobjects.yaml
var scaledObjectCRD []byte

var (
	scaledObjectOnce   sync.Once
	scaledObjectSchema *jsonschema.Schema
	scaledObjectErr    error
)

// ScaledObjectSchema returns the JSON schema of keda.sh/v1alpha1
// ScaledObject: the openAPIV3Schema of KEDA's CRD, made strict (an
// object schema with properties takes no other field, unless it says
// x-kubernetes-preserve-unknown-fields), as the API server is with
// fieldValidation=Strict.
func ScaledObjectSchema() (*jsonschema.Schema, error) {
	scaledObjectOnce.Do(func() {
		scaledObjectSchema, scaledObjectErr = compileCRD(scaledObjectCRD, "v1alpha1")
	})
	return scaledObjectSchema, scaledObjectErr
}

func compileCRD(crd []byte, version string) (*jsonschema.Schema, error) {
	var c struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(crd, &c); err != nil {
		return nil, fmt.Errorf("CRD: %w", err)
	}
	var s map[string]any
	for _, v := range c.Spec.Versions {
		if v.Name == version {
			s = v.Schema.OpenAPIV3Schema
		}
	}
	if s == nil {
		return nil, fmt.Errorf("CRD: no version %s", version)
	}
	// metadata is ObjectMeta, checked by checkMeta: the CRD says only
	// "type: object".
	closeObjects(s)
	j, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return nil, err
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("crd.json", doc); err != nil {
		return nil, err
	}
	return comp.Compile("crd.json")
}

// closeObjects sets additionalProperties false on every object schema in s
// that lists properties and says nothing of other fields.
func closeObjects(s any) {
	switch s := s.(type) {
	case map[string]any:
		_, props := s["properties"]
		_, addl := s["additionalProperties"]
		keep, _ := s["x-kubernetes-preserve-unknown-fields"].(bool)
		if props && !addl && !keep {
			s["additionalProperties"] = false
		}
		for _, v := range s {
			closeObjects(v)
		}
	case []any:
		for _, v := range s {
			closeObjects(v)
		}
	}
}

// ValidateScaledObject checks d against ScaledObjectSchema and the CRD's
// CEL rule (minReplicaCount at most maxReplicaCount, which defaults to 100).
func ValidateScaledObject(d Doc) error {
	s, err := ScaledObjectSchema()
	if err != nil {
		return err
	}
	j, err := json.Marshal(d.Object)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return err
	}
	if err := s.Validate(v); err != nil {
		return err
	}
	spec, _ := d.Object["spec"].(map[string]any)
	lo, hasLo := spec["minReplicaCount"].(float64)
	hi, hasHi := spec["maxReplicaCount"].(float64)
	if !hasHi {
		hi = 100
	}
	if hasLo && lo > hi {
		return fmt.Errorf("minReplicaCount %v is above maxReplicaCount %v", lo, hi)
	}
	return nil
}
