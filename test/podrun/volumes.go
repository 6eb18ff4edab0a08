package podrun

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mount is one volume mount of the container: a tmpfs at path, filled from
// the staged folder src (whose own mode and owner become the volume's).
type mount struct {
	path     string
	src      string
	readOnly bool
	size     string // tmpfs size= option, empty for the default
}

// Default modes of the kubelet's volumes.
const (
	defaultFileMode = 0o644 // secret, configMap, projected, downwardAPI
	emptyDirMode    = 0o777
)

// stageVolumes writes the content of every volume the container mounts
// into a folder under s.Dir, as the kubelet would populate it.
func stageVolumes(ctx context.Context, s Spec, c *corev1.Container, fsGroup *int64) ([]mount, error) {
	volumes := map[string]corev1.Volume{}
	for _, v := range s.Pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	var mounts []mount
	for i, vm := range c.VolumeMounts {
		if vm.SubPath != "" || vm.SubPathExpr != "" {
			return nil, fmt.Errorf("volumeMount %s: subPath is not supported", vm.Name)
		}
		if !path.IsAbs(vm.MountPath) {
			return nil, fmt.Errorf("volumeMount %s: mountPath %q is not absolute", vm.Name, vm.MountPath)
		}
		vol, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s: the pod has no such volume", vm.Name)
		}
		src := filepath.Join(s.Dir, "volumes", strconv.Itoa(i)+"-"+vm.Name)
		m := mount{path: path.Clean(vm.MountPath), src: src, readOnly: vm.ReadOnly}
		st := stager{ctx: ctx, s: s, dir: src, fsGroup: fsGroup}
		if err := st.volume(vol, &m); err != nil {
			return nil, fmt.Errorf("volume %s: %w", vol.Name, err)
		}
		mounts = append(mounts, m)
	}
	// Parents before children, as runtimes order mounts.
	sort.SliceStable(mounts, func(i, j int) bool { return len(mounts[i].path) < len(mounts[j].path) })
	return mounts, nil
}

// stager fills one volume's folder.
type stager struct {
	ctx     context.Context
	s       Spec
	dir     string
	fsGroup *int64
}

func (st stager) volume(vol corev1.Volume, m *mount) error {
	src := vol.VolumeSource
	switch {
	case src.EmptyDir != nil:
		if src.EmptyDir.SizeLimit != nil {
			m.size = strconv.FormatInt(src.EmptyDir.SizeLimit.Value(), 10)
		}
		return st.root(emptyDirMode)
	case src.PersistentVolumeClaim != nil:
		// A freshly provisioned volume: owned by fsGroup when set.
		if st.fsGroup != nil {
			return st.root(0o2775)
		}
		return st.root(emptyDirMode)
	case src.Secret != nil:
		if err := st.root(0o755); err != nil {
			return err
		}
		return st.secret(src.Secret.SecretName, src.Secret.Items, src.Secret.Optional, mode(src.Secret.DefaultMode))
	case src.ConfigMap != nil:
		if err := st.root(0o755); err != nil {
			return err
		}
		return st.configMap(src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, mode(src.ConfigMap.DefaultMode))
	case src.DownwardAPI != nil:
		if err := st.root(0o755); err != nil {
			return err
		}
		return st.downward(src.DownwardAPI.Items, mode(src.DownwardAPI.DefaultMode))
	case src.Projected != nil:
		if err := st.root(0o755); err != nil {
			return err
		}
		return st.projected(src.Projected)
	default:
		return fmt.Errorf("volume source %+v is not supported", src)
	}
}

func mode(m *int32) os.FileMode {
	if m == nil {
		return defaultFileMode
	}
	return os.FileMode(*m)
}

// root creates the volume's folder with the volume's mode, group fsGroup.
func (st stager) root(m os.FileMode) error {
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		return err
	}
	return st.own(st.dir, m)
}

// own sets a staged file's mode (with setuid/setgid/sticky bits) and gives
// it to root and fsGroup, as the kubelet's volume ownership does.
func (st stager) own(p string, m os.FileMode) error {
	gid := 0
	if st.fsGroup != nil {
		gid = int(*st.fsGroup)
	}
	if err := os.Chown(p, 0, gid); err != nil {
		return err
	}
	goMode := m.Perm()
	if m&0o4000 != 0 {
		goMode |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		goMode |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		goMode |= os.ModeSticky
	}
	return os.Chmod(p, goMode)
}

// write stores one file of the volume at relative path rel.
func (st stager) write(rel string, data []byte, m os.FileMode) error {
	if !filepath.IsLocal(rel) {
		return fmt.Errorf("path %q leaves the volume", rel)
	}
	p := filepath.Join(st.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return err
	}
	return st.own(p, m)
}

// keyed writes data's keys, or only items when listed (with their modes).
func (st stager) keyed(what string, data map[string][]byte, items []corev1.KeyToPath, m os.FileMode) error {
	if len(items) == 0 {
		for k, v := range data {
			if err := st.write(k, v, m); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		im := m
		if it.Mode != nil {
			im = os.FileMode(*it.Mode)
		}
		if err := st.write(it.Path, v, im); err != nil {
			return err
		}
	}
	return nil
}

func (st stager) secret(name string, items []corev1.KeyToPath, optional *bool, m os.FileMode) error {
	sec, err := st.s.Client.CoreV1().Secrets(st.s.Pod.Namespace).Get(st.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil
	}
	if err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	return st.keyed("secret "+name, sec.Data, items, m)
}

func (st stager) configMap(name string, items []corev1.KeyToPath, optional *bool, m os.FileMode) error {
	cm, err := st.s.Client.CoreV1().ConfigMaps(st.s.Pod.Namespace).Get(st.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil
	}
	if err != nil {
		return fmt.Errorf("configmap %s: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return st.keyed("configmap "+name, data, items, m)
}

func (st stager) downward(items []corev1.DownwardAPIVolumeFile, m os.FileMode) error {
	for _, it := range items {
		if it.FieldRef == nil {
			return fmt.Errorf("downwardAPI %s: only fieldRef is supported", it.Path)
		}
		v, err := fieldValue(st.s, it.FieldRef.FieldPath)
		if err != nil {
			return err
		}
		im := m
		if it.Mode != nil {
			im = os.FileMode(*it.Mode)
		}
		if err := st.write(it.Path, []byte(v), im); err != nil {
			return err
		}
	}
	return nil
}

func (st stager) projected(p *corev1.ProjectedVolumeSource) error {
	m := mode(p.DefaultMode)
	for _, src := range p.Sources {
		var err error
		switch {
		case src.Secret != nil:
			err = st.secret(src.Secret.Name, src.Secret.Items, src.Secret.Optional, m)
		case src.ConfigMap != nil:
			err = st.configMap(src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, m)
		case src.DownwardAPI != nil:
			err = st.downward(src.DownwardAPI.Items, m)
		case src.ServiceAccountToken != nil:
			err = st.token(src.ServiceAccountToken, m)
		default:
			err = fmt.Errorf("projected source %+v is not supported", src)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// token asks the TokenRequest API for the pod's service-account token,
// bound to the pod, as the kubelet does.
func (st stager) token(src *corev1.ServiceAccountTokenProjection, m os.FileMode) error {
	pod := st.s.Pod
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := st.s.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(st.ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of service account %s/%s: %w", pod.Namespace, sa, err)
	}
	return st.write(src.Path, []byte(tr.Status.Token), m)
}
