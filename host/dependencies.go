package host

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/orqest/sandbox/shared"
)

// Policy allowed_packages: the distributions an ExecuteRequest may name in
// Dependencies. The host refuses any other before calling the plugin
// (Sandbox.Execute), and passes the list to the plugin once, in
// ConfigureRequest.AllowedPackages, so the backend (and, for tier 2, the
// in-container runtime) can refuse again. Entries are package names
// compared after PEP 503 normalisation ("Foo_Bar" == "foo-bar"); a version
// pin belongs in the request ("name==1.2"), not in the policy.

// checkAllowedPackages reports allowed_packages entries that are not
// package names.
func checkAllowedPackages(p *PolicyConfig) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, name := range p.AllowedPackages {
		if _, err := shared.ParseRequirement(name); err != nil || strings.Contains(name, "==") {
			diags = append(diags, errDiag(p.AllowedPackagesRange, "Invalid package name",
				fmt.Sprintf("allowed_packages entry %q is not a Python package name (letters, digits, '.', '_', '-'; no version).", name)))
		}
	}
	return diags
}
