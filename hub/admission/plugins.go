package admission

import (
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/hub/apiserver"
)

// Names of the plugins, as --enable-admission-plugins and the API server's
// metrics and logs show them.
const (
	ValidationPluginName = "FlotillaValidation"
	TaintTimePluginName  = "FlotillaTaintTime"
	ProtectionPluginName = "FlotillaProtection"
)

// Plugins are Flotilla's admission plugins for the hub's API server; clk
// stamps taints (nil means the real clock); hubUser is the user the hub's
// own clients authenticate as (apiserver.HubUser), the only one that
// writes agent certificate requests and serials.
func Plugins(clk clock.PassiveClock, hubUser string) []apiserver.AdmissionPlugin {
	return []apiserver.AdmissionPlugin{
		{Name: ValidationPluginName, New: func() (admission.Interface, error) { return NewValidation(), nil }},
		{Name: TaintTimePluginName, New: func() (admission.Interface, error) { return NewTaintTime(clk), nil }},
		{Name: ProtectionPluginName, New: func() (admission.Interface, error) { return NewProtection(hubUser), nil }},
	}
}
