package server

import "testing"

// TestClientKey: an IPv6 client is keyed by its /64 (a host holds a whole
// /64 and can use any address in it), an IPv4-mapped address by its IPv4
// address, an IPv4 client by its address.
func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"2001:db8:1:2::1":            "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff:ffff:0:9": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":            "2001:db8:1:3::/64",
		"fe80::1%eth0":               "fe80::/64",
		"::ffff:192.0.2.7":           "192.0.2.7",
		"192.0.2.7":                  "192.0.2.7",
		"not an address":             "not an address",
	} {
		if got := keyOfAddr(in); got != want {
			t.Errorf("keyOfAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
