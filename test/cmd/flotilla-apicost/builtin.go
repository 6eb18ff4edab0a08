package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	genericfeatures "k8s.io/apiserver/pkg/features"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/compatibility"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/internal/pki"
)

// internalVersion registers the same Go types as the group's in-memory
// version: with one served version and no conversion, the generic
// registry's decode-to-internal is a type check.
var internalVersion = schema.GroupVersion{Group: v1alpha1.GroupName, Version: runtime.APIVersionInternal}

func builtinScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	scheme.AddKnownTypes(internalVersion, &v1alpha1.ResourceBinding{}, &v1alpha1.ResourceBindingList{})
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	scheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	return scheme, scheme.SetVersionPriority(v1alpha1.SchemeGroupVersion)
}

// serveBuiltin runs a k8s.io/apiserver generic API server that serves
// ResourceBinding compiled in, storing in etcd as JSON, or as CBOR (and
// accepting CBOR on the wire) with useCBOR, until ctx ends. It writes
// dir/admin.kubeconfig once it serves.
func serveBuiltin(ctx context.Context, dir, etcdURL string, useCBOR bool) error {
	if useCBOR {
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(genericfeatures.CBORServingAndStorage): true}); err != nil {
			return fmt.Errorf("feature gate: %w", err)
		}
	}
	scheme, err := builtinScheme()
	if err != nil {
		return fmt.Errorf("scheme: %w", err)
	}
	var codecs serializer.CodecFactory
	if useCBOR {
		codecs = serializer.NewCodecFactory(scheme, serializer.WithSerializer(cbor.NewSerializerInfo))
	} else {
		codecs = serializer.NewCodecFactory(scheme)
	}
	ca, err := pki.NewCA("flotilla-apicost", certValidity)
	if err != nil {
		return err
	}
	cfg, ln, err := genericConfig(dir, codecs, ca)
	if err != nil {
		return err
	}
	if err := applyEtcd(cfg, codecs, etcdURL, "/"+filepath.Base(dir), useCBOR); err != nil {
		return err
	}
	defs, err := openAPIDefinitions()
	if err != nil {
		return err
	}
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(defs, apiopenapi.NewDefinitionNamer(scheme))
	cfg.OpenAPIV3Config.GetDefinitionName, err = withKinds(scheme, cfg.OpenAPIV3Config.GetDefinitionName)
	if err != nil {
		return err
	}
	server, err := cfg.Complete(nil).New("flotilla-apicost", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return fmt.Errorf("generic API server: %w", err)
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(v1alpha1.GroupName, scheme, metav1.ParameterCodec, codecs)
	storage, err := bindingStorage(scheme, cfg.RESTOptionsGetter)
	if err != nil {
		return fmt.Errorf("resourcebindings storage: %w", err)
	}
	group.VersionedResourcesStorageMap[v1alpha1.Version] = storage
	if err := server.InstallAPIGroup(&group); err != nil {
		return fmt.Errorf("install %s: %w", v1alpha1.GroupName, err)
	}
	url := "https://" + ln.Addr().String()
	if err := apiserver.WriteAdminKubeconfig(filepath.Join(dir, "admin.kubeconfig"), url, ca); err != nil {
		return err
	}
	return server.PrepareRun().RunWithContext(ctx)
}

// genericConfig serves HTTPS on a free loopback port with a certificate of
// ca, authenticates client certificates of ca as kube-apiserver does, and
// lets system:masters do anything (kube-apiserver's first authorizer).
func genericConfig(dir string, codecs serializer.CodecFactory, ca *pki.CA) (*genericapiserver.Config, net.Listener, error) {
	cfg := genericapiserver.NewConfig(codecs)
	cfg.EffectiveVersion = compatibility.NewEffectiveVersionFromString("1.37", "", "")
	serving, err := ca.Issue(pki.Request{CommonName: "localhost", DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.ServerAuth, ValidFor: certValidity})
	if err != nil {
		return nil, nil, fmt.Errorf("serving certificate: %w", err)
	}
	certFile, keyFile := filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	if err := os.WriteFile(certFile, serving.CertPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keyFile, serving.KeyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	secure := options.NewSecureServingOptions()
	secure.Listener, secure.BindPort = ln, ln.Addr().(*net.TCPAddr).Port
	secure.ServerCert.CertKey = options.CertKey{CertFile: certFile, KeyFile: keyFile}
	if err := secure.WithLoopback().ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, nil, fmt.Errorf("serving: %w", err)
	}
	// The TLS handshake asks for client certificates only with a client CA.
	clientCA, err := dynamiccertificates.NewStaticCAContent("client-ca", ca.CertPEM())
	if err != nil {
		return nil, nil, fmt.Errorf("client CA: %w", err)
	}
	cfg.SecureServing.ClientCA = clientCA
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	verify := x509request.DefaultVerifyOptions()
	verify.Roots = roots
	cfg.Authentication.Authenticator = x509request.New(verify, x509request.CommonNameUserConversion)
	cfg.Authorization.Authorizer = authorizerfactory.NewPrivilegedGroups("system:masters")
	genericapiserver.AuthorizeClientBearerToken(cfg.LoopbackClientConfig, &cfg.Authentication, &cfg.Authorization)
	return cfg, ln, nil
}

// applyEtcd stores in etcd under prefix, as JSON or CBOR.
func applyEtcd(cfg *genericapiserver.Config, codecs serializer.CodecFactory, etcdURL, prefix string, useCBOR bool) error {
	codec := codecs.LegacyCodec(v1alpha1.SchemeGroupVersion)
	if useCBOR {
		info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeCBOR)
		if !ok {
			return fmt.Errorf("no CBOR serializer")
		}
		codec = codecs.CodecForVersions(info.Serializer, codecs.UniversalDeserializer(), v1alpha1.SchemeGroupVersion, nil)
	}
	etcd := options.NewEtcdOptions(storagebackend.NewDefaultConfig(prefix, codec))
	etcd.StorageConfig.Transport.ServerList = []string{etcdURL}
	if err := etcd.ApplyTo(cfg); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return nil
}
