package podrun

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerEnv builds the environment in the kubelet's order: the image's,
// HOSTNAME, the kubernetes Service's, envFrom, env (each may refer to the
// earlier ones with $(VAR)), then the spec's extra variables.
func containerEnv(ctx context.Context, s Spec, c *corev1.Container) ([]string, error) {
	vars := newEnv()
	for _, kv := range s.Image.Env {
		k, v, _ := strings.Cut(kv, "=")
		vars.set(k, v)
	}
	vars.set("HOSTNAME", podHostname(s.Pod))
	svc, err := serviceEnv(s.APIServer)
	if err != nil {
		return nil, err
	}
	for _, e := range svc {
		vars.set(e.Name, e.Value)
	}
	for _, from := range c.EnvFrom {
		data, err := envFromData(ctx, s, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			vars.set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		v, err := envValue(ctx, s, e, vars)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		vars.set(e.Name, v)
	}
	for _, kv := range s.ExtraEnv {
		k, v, _ := strings.Cut(kv, "=")
		vars.set(k, v)
	}
	return vars.list(), nil
}

func envValue(ctx context.Context, s Spec, e corev1.EnvVar, vars *env) (string, error) {
	from := e.ValueFrom
	switch {
	case from == nil:
		return expand(e.Value, vars.lookup), nil
	case from.FieldRef != nil:
		return fieldValue(s, from.FieldRef.FieldPath)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		sec, err := s.Client.CoreV1().Secrets(s.Pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := sec.Data[ref.Key]
		if !ok {
			return "", fmt.Errorf("secret %s has no key %s", ref.Name, ref.Key)
		}
		return string(v), nil
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := s.Client.CoreV1().ConfigMaps(s.Pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			return "", fmt.Errorf("configmap %s has no key %s", ref.Name, ref.Key)
		}
		return v, nil
	default:
		return "", fmt.Errorf("valueFrom %v is not supported", from)
	}
}

func envFromData(ctx context.Context, s Spec, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := s.Client.CoreV1().ConfigMaps(s.Pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("envFrom: %w", err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		sec, err := s.Client.CoreV1().Secrets(s.Pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("envFrom: %w", err)
		}
		data := map[string]string{}
		for k, v := range sec.Data {
			data[k] = string(v)
		}
		return data, nil
	default:
		return nil, fmt.Errorf("envFrom %v is not supported", from)
	}
}

// fieldValue is the downward API's value of a pod field.
func fieldValue(s Spec, path string) (string, error) {
	pod := s.Pod
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs":
		return s.PodIP, nil // the container shares the host's network
	}
	return "", fmt.Errorf("fieldRef %q is not supported", path)
}

// subscript parses FIELD['KEY'].
func subscript(path, field string) (string, bool) {
	rest, ok := strings.CutPrefix(path, field+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// containerArgv is the command (or the image's entrypoint) and args, with
// $(VAR) references expanded.
func containerArgv(img Image, c *corev1.Container, envList []string) ([]string, error) {
	vars := newEnv()
	for _, kv := range envList {
		k, v, _ := strings.Cut(kv, "=")
		vars.set(k, v)
	}
	var argv []string
	if len(c.Command) > 0 {
		for _, a := range c.Command {
			argv = append(argv, expand(a, vars.lookup))
		}
	} else {
		argv = append(argv, img.Entrypoint...)
	}
	for _, a := range c.Args {
		argv = append(argv, expand(a, vars.lookup))
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("container %s: no command and no image entrypoint", c.Name)
	}
	if _, ok := img.Binaries[argv[0]]; !ok {
		return nil, fmt.Errorf("container %s: command %q is not a binary of the image", c.Name, argv[0])
	}
	return argv, nil
}

// expand replaces $(VAR) with VAR's value when defined and $$ with $, as
// Kubernetes does for command, args and env values.
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// env is an ordered environment: a later set replaces the value in place.
type env struct {
	keys   []string
	values map[string]string
}

func newEnv() *env { return &env{values: map[string]string{}} }

func (e *env) set(k, v string) {
	if _, ok := e.values[k]; !ok {
		e.keys = append(e.keys, k)
	}
	e.values[k] = v
}

func (e *env) lookup(k string) (string, bool) {
	v, ok := e.values[k]
	return v, ok
}

func (e *env) list() []string {
	out := make([]string, 0, len(e.keys))
	for _, k := range e.keys {
		out = append(out, k+"="+e.values[k])
	}
	return out
}
