package ociimage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// DpkgStatus is the dpkg database's record of installed packages.
const DpkgStatus = "/var/lib/dpkg/status"

// caPackageName is the Debian package whose certificates make up CABundle.
const caPackageName = "ca-certificates"

// debPackage is an installed Debian package, as dpkg records it.
type debPackage struct {
	Name, Version, Arch string
}

// purl is the package URL of a Debian package.
func (p debPackage) purl() string {
	return "pkg:deb/debian/" + p.Name + "@" + purlEscape(p.Version) + "?arch=" + purlEscape(p.Arch)
}

// readCAPackage finds the installed ca-certificates in the dpkg status file
// at path. The image's CA bundle is the build host's, so the SBOM must say
// which package version it came from; a host without that record cannot
// say, and is refused rather than leaving the bundle out of the SBOM.
func readCAPackage(path string) (debPackage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return debPackage{}, fmt.Errorf("reading which %s the CA bundle %s comes from: %w; the SBOM names the Debian package, so build on Debian with it installed", caPackageName, CABundle, err)
	}
	for _, stanza := range bytes.Split(b, []byte("\n\n")) {
		fields := dpkgFields(stanza)
		if fields["Package"] != caPackageName {
			continue
		}
		// "install ok installed", "hold ok installed": unpacked and
		// configured. A removed package can leave the bundle behind.
		status := strings.Fields(fields["Status"])
		if len(status) != 3 || status[1] != "ok" || status[2] != "installed" {
			continue
		}
		p := debPackage{Name: caPackageName, Version: fields["Version"], Arch: fields["Architecture"]}
		if p.Version == "" || p.Arch == "" {
			return debPackage{}, fmt.Errorf("%s: the record of %s has no Version or Architecture", path, caPackageName)
		}
		return p, nil
	}
	return debPackage{}, fmt.Errorf("%s records no installed %s: the SBOM must name the package the CA bundle %s comes from; install it (apt-get install ca-certificates)", path, caPackageName, CABundle)
}

// dpkgFields are the single-line fields of one stanza of a dpkg status
// file; continuation lines (a description, conffiles) are skipped.
func dpkgFields(stanza []byte) map[string]string {
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(stanza))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields
}

// purlEscape percent-encodes all but the unreserved characters of RFC 3986,
// as a purl's version and qualifier values need: a Debian version may hold
// "+" and an epoch's ":".
func purlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
