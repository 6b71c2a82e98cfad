package main

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// checker collects the problems of one object.
type checker struct {
	opts     options
	problems []string
}

func (c *checker) addf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// object checks what the API server would check of obj's metadata and pod
// template, and the agent's rules for its containers.
func (c *checker) object(obj runtime.Object) {
	if m, ok := obj.(metav1.Object); ok {
		c.meta(m)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		c.podSpec("spec", &o.Spec)
	case *appsv1.Deployment:
		c.podSpec("spec.template.spec", &o.Spec.Template.Spec)
	case *appsv1.StatefulSet:
		c.podSpec("spec.template.spec", &o.Spec.Template.Spec)
	case *appsv1.DaemonSet:
		c.podSpec("spec.template.spec", &o.Spec.Template.Spec)
	case *batchv1.Job:
		c.podSpec("spec.template.spec", &o.Spec.Template.Spec)
	}
}

func (c *checker) meta(m metav1.Object) {
	for _, e := range validation.IsDNS1123Subdomain(m.GetName()) {
		c.addf("metadata.name %q: %s", m.GetName(), e)
	}
	for k, v := range m.GetLabels() {
		for _, e := range validation.IsQualifiedName(k) {
			c.addf("label key %q: %s", k, e)
		}
		for _, e := range validation.IsValidLabelValue(v) {
			c.addf("label %s value %q: %s", k, v, e)
		}
	}
}

var (
	restartPolicies = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	pullPolicies    = []corev1.PullPolicy{"", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	protocols       = []corev1.Protocol{"", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
)

func (c *checker) podSpec(at string, spec *corev1.PodSpec) {
	if len(spec.Containers) == 0 {
		c.addf("%s.containers: at least one container is required", at)
	}
	if spec.RestartPolicy != "" && !slices.Contains(restartPolicies, spec.RestartPolicy) {
		c.addf("%s.restartPolicy %q: want one of %v", at, spec.RestartPolicy, restartPolicies)
	}
	volumes := map[string]bool{}
	for i, v := range spec.Volumes {
		vat := fmt.Sprintf("%s.volumes[%d]", at, i)
		for _, e := range validation.IsDNS1123Label(v.Name) {
			c.addf("%s.name %q: %s", vat, v.Name, e)
		}
		if volumes[v.Name] {
			c.addf("%s.name %q: given twice", vat, v.Name)
		}
		volumes[v.Name] = true
		if n := setFields(v.VolumeSource); n != 1 {
			c.addf("%s: %d volume sources, want exactly one (emptyDir, secret, ...)", vat, n)
		}
	}
	names := map[string]bool{}
	for i := range spec.InitContainers {
		c.container(fmt.Sprintf("%s.initContainers[%d]", at, i), &spec.InitContainers[i], volumes, names)
	}
	for i := range spec.Containers {
		ct := &spec.Containers[i]
		cat := fmt.Sprintf("%s.containers[%d]", at, i)
		c.container(cat, ct, volumes, names)
		if runsAgent(ct) {
			c.agent(cat, spec, ct)
		}
	}
	if c.opts.agentVersion != "" {
		for _, ct := range slices.Concat(spec.InitContainers, spec.Containers) {
			repo, tag := splitImage(ct.Image)
			if path.Base(repo) == "sandbox-executor" && tag != c.opts.agentVersion {
				c.addf("container %s: image %s, want tag %s, this version of the agent", ct.Name, ct.Image, c.opts.agentVersion)
			}
		}
	}
}

// setFields counts the non-nil pointer fields of a struct such as a
// VolumeSource, whose one set field says what it is.
func setFields(v any) int {
	rv := reflect.ValueOf(v)
	n := 0
	for i := range rv.NumField() {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

func (c *checker) container(at string, ct *corev1.Container, volumes, names map[string]bool) {
	for _, e := range validation.IsDNS1123Label(ct.Name) {
		c.addf("%s.name %q: %s", at, ct.Name, e)
	}
	if names[ct.Name] {
		c.addf("%s.name %q: given twice in the pod", at, ct.Name)
	}
	names[ct.Name] = true
	if ct.Image == "" {
		c.addf("%s.image: required", at)
	}
	if !slices.Contains(pullPolicies, ct.ImagePullPolicy) {
		c.addf("%s.imagePullPolicy %q: want one of %v", at, ct.ImagePullPolicy, pullPolicies[1:])
	}
	ports := map[string]int32{}
	for i, p := range ct.Ports {
		pat := fmt.Sprintf("%s.ports[%d]", at, i)
		for _, e := range validation.IsValidPortNum(int(p.ContainerPort)) {
			c.addf("%s.containerPort %d: %s", pat, p.ContainerPort, e)
		}
		if !slices.Contains(protocols, p.Protocol) {
			c.addf("%s.protocol %q: want one of %v", pat, p.Protocol, protocols[1:])
		}
		if p.Name == "" {
			continue
		}
		for _, e := range validation.IsValidPortName(p.Name) {
			c.addf("%s.name %q: %s", pat, p.Name, e)
		}
		if _, dup := ports[p.Name]; dup {
			c.addf("%s.name %q: given twice", pat, p.Name)
		}
		ports[p.Name] = p.ContainerPort
	}
	c.probe(at+".readinessProbe", ct.ReadinessProbe, ports)
	c.probe(at+".livenessProbe", ct.LivenessProbe, ports)
	c.probe(at+".startupProbe", ct.StartupProbe, ports)
	for name, limit := range ct.Resources.Limits {
		if req, ok := ct.Resources.Requests[name]; ok && req.Cmp(limit) > 0 {
			c.addf("%s.resources: the %s request %s is above its limit %s", at, name, req.String(), limit.String())
		}
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := ct.Resources.Requests[r]; !ok {
			c.addf("%s.resources.requests.%s: required here, so that the scheduler can place the sandbox", at, r)
		}
		if _, ok := ct.Resources.Limits[r]; !ok {
			c.addf("%s.resources.limits.%s: required here, so that one sandbox cannot starve its node", at, r)
		}
	}
	mounts := map[string]bool{}
	for i, m := range ct.VolumeMounts {
		mat := fmt.Sprintf("%s.volumeMounts[%d]", at, i)
		if !volumes[m.Name] {
			c.addf("%s.name %q: no such volume in the pod", mat, m.Name)
		}
		if !path.IsAbs(m.MountPath) {
			c.addf("%s.mountPath %q: must be absolute", mat, m.MountPath)
		}
		if mounts[m.MountPath] {
			c.addf("%s.mountPath %q: mounted twice", mat, m.MountPath)
		}
		mounts[m.MountPath] = true
	}
	for i, e := range ct.Env {
		eat := fmt.Sprintf("%s.env[%d]", at, i)
		for _, msg := range validation.IsEnvVarName(e.Name) {
			c.addf("%s.name %q: %s", eat, e.Name, msg)
		}
		if e.ValueFrom != nil {
			if e.Value != "" {
				c.addf("%s (%s): value and valueFrom are exclusive", eat, e.Name)
			}
			if n := setFields(*e.ValueFrom); n != 1 {
				c.addf("%s.valueFrom (%s): %d sources, want exactly one", eat, e.Name, n)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil && (r.Name == "" || r.Key == "") {
				c.addf("%s.valueFrom.secretKeyRef (%s): name and key are required", eat, e.Name)
			}
		}
	}
	if sc := ct.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		switch sc.SeccompProfile.Type {
		case corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined, corev1.SeccompProfileTypeLocalhost:
		default:
			c.addf("%s.securityContext.seccompProfile.type %q: unknown", at, sc.SeccompProfile.Type)
		}
	}
}

// probe checks that p, if set, has one handler, and that an HTTP or TCP
// probe's port is a number or the name of one of ports.
func (c *checker) probe(at string, p *corev1.Probe, ports map[string]int32) {
	if p == nil {
		return
	}
	if n := setFields(p.ProbeHandler); n != 1 {
		c.addf("%s: %d handlers, want exactly one (httpGet, tcpSocket, exec or grpc)", at, n)
	}
	var port *intstr.IntOrString
	switch {
	case p.HTTPGet != nil:
		port = &p.HTTPGet.Port
		if !strings.HasPrefix(p.HTTPGet.Path, "/") {
			c.addf("%s.httpGet.path %q: must start with /", at, p.HTTPGet.Path)
		}
	case p.TCPSocket != nil:
		port = &p.TCPSocket.Port
	}
	if port == nil {
		return
	}
	if port.Type == intstr.String {
		if _, ok := ports[port.StrVal]; !ok {
			c.addf("%s: port %q is not the name of a port of the container", at, port.StrVal)
		}
	} else {
		for _, e := range validation.IsValidPortNum(port.IntValue()) {
			c.addf("%s: port %d: %s", at, port.IntValue(), e)
		}
	}
}

// runsAgent reports whether ct runs the agent: its command (or, without
// one, its image) is sandbox-executor, and it is not the install step.
func runsAgent(ct *corev1.Container) bool {
	if len(ct.Command) > 0 {
		return path.Base(ct.Command[0]) == "sandbox-executor"
	}
	repo, _ := splitImage(ct.Image)
	return path.Base(repo) == "sandbox-executor" && (len(ct.Args) == 0 || ct.Args[0] != "install")
}

// agent checks this project's rules for container ct, which runs the
// agent: probes on /health at the port named api, the two ports named api
// and proxy at the ports the agent listens on, the secret from a Secret
// (never written in the manifest), no privilege escalation, and no service
// account token in the pod, as the secret's holder can read it.
func (c *checker) agent(at string, spec *corev1.PodSpec, ct *corev1.Container) {
	env := map[string]corev1.EnvVar{}
	for _, e := range ct.Env {
		env[e.Name] = e
	}
	wantPorts := map[string]string{"api": "3030", "proxy": "3031"}
	if v := env["SANDBOX_PORT"].Value; v != "" {
		wantPorts["api"] = v
	}
	if v := env["SANDBOX_PROXY_PORT"].Value; v != "" {
		wantPorts["proxy"] = v
	}
	for name, want := range wantPorts {
		i := slices.IndexFunc(ct.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
		if i < 0 {
			c.addf("%s.ports: no port named %s (the agent's %s port, %s)", at, name, name, want)
		} else if got := strconv.Itoa(int(ct.Ports[i].ContainerPort)); got != want {
			c.addf("%s.ports: %s is %s, but the agent listens on %s", at, name, got, want)
		}
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
	}{{"readinessProbe", ct.ReadinessProbe}, {"livenessProbe", ct.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != "/health" || p.probe.HTTPGet.Port.String() != "api" {
			c.addf("%s.%s: want httpGet on /health at port api (the one endpoint open without the token)", at, p.what)
		}
	}
	secret, hasSecret := env["SANDBOX_SECRET"]
	pool := strings.EqualFold(env["SANDBOX_AUTH_MODE"].Value, "pool")
	switch {
	case hasSecret && pool:
		c.addf("%s.env: SANDBOX_SECRET and SANDBOX_AUTH_MODE=pool are exclusive (the agent refuses to start)", at)
	case hasSecret && (secret.ValueFrom == nil || secret.ValueFrom.SecretKeyRef == nil):
		c.addf("%s.env: SANDBOX_SECRET must come from a Secret (valueFrom.secretKeyRef), not be written here", at)
	case !hasSecret && !pool:
		c.addf("%s.env: no SANDBOX_SECRET (from a Secret) and not SANDBOX_AUTH_MODE=pool: the agent refuses to start", at)
	}
	if sc := ct.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		c.addf("%s.securityContext.allowPrivilegeEscalation: want false", at)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		c.addf("automountServiceAccountToken: want false, or every holder of the secret can use the pod's service account")
	}
}

// splitImage splits an image reference into its repository and tag ("" if
// none; a digest counts as none).
func splitImage(image string) (repo, tag string) {
	image, _, _ = strings.Cut(image, "@")
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") { // a registry's port, not a tag
		return image, ""
	}
	return image[:i], image[i+1:]
}
