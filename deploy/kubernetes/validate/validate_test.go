package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The manifests in deploy/kubernetes pass, with the image tag of the
// VERSION file.
func TestManifestsPass(t *testing.T) {
	version, err := os.ReadFile("../../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	failed, err := run([]string{".."}, options{agentVersion: strings.TrimSpace(string(version))}, &out)
	if err != nil || failed > 0 {
		t.Fatalf("failed %d, err %v:\n%s", failed, err, &out)
	}
	if !strings.Contains(out.String(), "PASS ../sandbox-pod.yaml: Pod sandbox-1") {
		t.Errorf("the sandbox Pod was not checked:\n%s", &out)
	}
}

// Each mistake, made in the real manifest, is found, and named.
func TestMistakesAreFound(t *testing.T) {
	good, err := os.ReadFile("../sandbox-pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		old, new string // replaced once in the manifest
		want     string // in a problem
	}{
		{"misspelt field", "readinessProbe:", "readinessProbes:", `unknown field "spec.containers[0].readinessProbes"`},
		{"field in the wrong case", "livenessProbe:", "LivenessProbe:", `unknown field "spec.containers[0].LivenessProbe"`},
		{"field at the wrong level", "  restartPolicy: Always\n", "  template: {}\n", `unknown field "spec.template"`},
		{"number as a string", "containerPort: 3030", `containerPort: "3030"`, "cannot unmarshal string"},
		{"invalid quantity", "memory: 2Gi,", "memory: 2Gb,", "quantities must match"},
		{"key given twice", "  name: sandbox-1\n", "  name: sandbox-1\n  name: sandbox-2\n", `key "name" already set`},
		{"unknown kind", "kind: Pod", "kind: Pods", "unknown kind"},
		{"unknown enum value", "restartPolicy: Always", "restartPolicy: always", `restartPolicy "always"`},
		{"probe on an undeclared port", "httpGet: { path: /health, port: api }\n        periodSeconds: 5",
			"httpGet: { path: /health, port: http }\n        periodSeconds: 5", `port "http" is not the name of a port`},
		{"port name too long", "name: proxy", "name: proxy-of-the-agent", `name "proxy-of-the-agent"`},
		{"mount of no volume", "- name: home\n          mountPath", "- name: homes\n          mountPath", `"homes": no such volume`},
		{"request above the limit", "cpu: 250m", `cpu: "3"`, "the cpu request 3 is above its limit 2"},
		{"no limits", `limits: { cpu: "2", memory: 2Gi, ephemeral-storage: 4Gi }`, `limits: { ephemeral-storage: 4Gi }`,
			"resources.limits.cpu: required"},
		{"secret written in the manifest", "valueFrom:\n            secretKeyRef:\n              name: sandbox-1-secret\n              key: secret",
			`value: "hunter2"`, "SANDBOX_SECRET must come from a Secret"},
		{"liveness probe elsewhere", "livenessProbe:\n        httpGet: { path: /health, port: api }",
			"livenessProbe:\n        httpGet: { path: /, port: api }", "livenessProbe: want httpGet on /health at port api"},
		{"proxy port moved", "containerPort: 3031", "containerPort: 3032", "proxy is 3032, but the agent listens on 3031"},
		{"service account token", "automountServiceAccountToken: false", "automountServiceAccountToken: true",
			"automountServiceAccountToken: want false"},
		{"privilege escalation", "allowPrivilegeEscalation: false\n        capabilities:\n          drop: [\"ALL\"]\n        # Commands",
			"allowPrivilegeEscalation: true\n        capabilities:\n          drop: [\"ALL\"]\n        # Commands", "allowPrivilegeEscalation: want false"},
		{"agent image of another version", "image: sandbox-executor:0.1.0", "image: sandbox-executor:0.0.9", "want tag 0.1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Contains(good, []byte(tt.old)) {
				t.Fatalf("the manifest has no %q any more: update the test", tt.old)
			}
			bad := bytes.Replace(good, []byte(tt.old), []byte(tt.new), 1)
			results, err := validateFile(bad, options{agentVersion: "0.1.0"})
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, r := range results {
				all = append(all, r.problems...)
			}
			if !strings.Contains(strings.Join(all, "\n"), tt.want) {
				t.Errorf("want a problem with %q, got %q", tt.want, all)
			}
		})
	}
}

// A file that is not YAML documents, and a directory without manifests,
// are errors, not passes.
func TestNothingToCheck(t *testing.T) {
	if _, err := validateFile([]byte("# only a comment\n---\n"), options{}); err == nil {
		t.Error("a file without a document passed")
	}
	if _, err := run([]string{t.TempDir()}, options{}, &bytes.Buffer{}); err == nil {
		t.Error("a directory without manifests passed")
	}
}
