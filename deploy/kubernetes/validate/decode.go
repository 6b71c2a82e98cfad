package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// scheme knows the kinds a sandbox's manifests may use.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme,
		batchv1.AddToScheme, networkingv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// result is what validateFile found in one document.
type result struct {
	name     string   // "Kind name"
	problems []string // empty if it passed
}

// options are the checks' settings.
type options struct {
	// agentVersion, if not empty, is the tag every image named
	// sandbox-executor must have.
	agentVersion string
}

// validateFile validates every YAML document of data. Its error is for
// data that is not YAML documents at all.
func validateFile(data []byte, opts options) ([]result, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var results []result
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if isEmpty(doc) {
			continue
		}
		results = append(results, validateDoc(doc, opts))
	}
	if len(results) == 0 {
		return nil, errors.New("no YAML document")
	}
	return results, nil
}

// isEmpty reports whether doc holds nothing but comments and blank lines.
func isEmpty(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && t != "---" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

// validateDoc decodes doc strictly into the type of its kind, then checks
// it.
func validateDoc(doc []byte, opts options) result {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return result{name: "?", problems: []string{err.Error()}}
	}
	res := result{name: tm.Kind}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil || tm.APIVersion == "" || tm.Kind == "" {
		res.problems = append(res.problems, fmt.Sprintf("apiVersion %q and kind %q: both are required", tm.APIVersion, tm.Kind))
		return res
	}
	obj, err := scheme.New(gv.WithKind(tm.Kind))
	if err != nil {
		res.problems = append(res.problems, fmt.Sprintf("unknown kind: %v", err))
		return res
	}
	// Strict, as the API server's strict field validation: a key given
	// twice, a field the type does not have (field names are
	// case-sensitive), a value of the wrong type are all errors, each
	// named by its path.
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		res.problems = append(res.problems, err.Error())
		return res
	}
	strict, err := sigsjson.UnmarshalStrict(js, obj)
	for _, e := range strict {
		res.problems = append(res.problems, e.Error())
	}
	if err != nil {
		res.problems = append(res.problems, err.Error())
	}
	if len(res.problems) > 0 {
		return res
	}
	if m, ok := obj.(metav1.Object); ok {
		res.name = tm.Kind + " " + m.GetName()
	}
	c := &checker{opts: opts}
	c.object(obj)
	res.problems = c.problems
	return res
}
