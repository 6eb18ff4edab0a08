package podrun

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// security is what the container's and pod's securityContexts make of the
// process.
type security struct {
	uid, gid     int64
	groups       []int64 // supplementary: fsGroup and supplementalGroups
	fsGroup      *int64
	readOnlyRoot bool
	noNewPrivs   bool
}

// resolveSecurity merges the pod's and the container's securityContexts as
// the kubelet does (the container's fields win) and refuses what this
// runner cannot honour, rather than silently running differently.
func resolveSecurity(pod *corev1.Pod, c *corev1.Container, img Image) (security, error) {
	s := security{uid: img.User, gid: img.Group, noNewPrivs: true}
	var runAsNonRoot *bool
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			s.uid = *psc.RunAsUser
		}
		if psc.RunAsGroup != nil {
			s.gid = *psc.RunAsGroup
		}
		runAsNonRoot = psc.RunAsNonRoot
		s.fsGroup = psc.FSGroup
		if psc.FSGroup != nil {
			s.groups = append(s.groups, *psc.FSGroup)
		}
		s.groups = append(s.groups, psc.SupplementalGroups...)
	}
	csc := c.SecurityContext
	if csc != nil {
		if csc.RunAsUser != nil {
			s.uid = *csc.RunAsUser
		}
		if csc.RunAsGroup != nil {
			s.gid = *csc.RunAsGroup
		}
		if csc.RunAsNonRoot != nil {
			runAsNonRoot = csc.RunAsNonRoot
		}
		if csc.ReadOnlyRootFilesystem != nil {
			s.readOnlyRoot = *csc.ReadOnlyRootFilesystem
		}
		if csc.AllowPrivilegeEscalation != nil {
			s.noNewPrivs = !*csc.AllowPrivilegeEscalation
		}
		if csc.Privileged != nil && *csc.Privileged {
			return s, errors.New("privileged containers are not supported")
		}
		if csc.Capabilities != nil && len(csc.Capabilities.Add) > 0 {
			return s, fmt.Errorf("capabilities.add %v is not supported (a non-root process here has none)", csc.Capabilities.Add)
		}
	}
	if runAsNonRoot != nil && *runAsNonRoot && s.uid == 0 {
		// The kubelet's own refusal: CreateContainerConfigError.
		return s, errors.New("runAsNonRoot is true but the container would run as uid 0")
	}
	if s.uid == 0 {
		return s, errors.New("running as root is not supported: the process would keep the runner's capabilities")
	}
	return s, nil
}
