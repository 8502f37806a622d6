// Package config is the gateway's HCL configuration: decoded with gohcl
// into typed structs, checked, and turned into a Config whose paths are
// absolute, every problem reported with its file:line; and the files a
// configuration names (private keys, passphrases, secrets), read with
// their permissions checked. It knows nothing of the engine that uses it.
package config
