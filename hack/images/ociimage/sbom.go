package ociimage

import (
	"crypto/sha1"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// The SPDX 2.3 document of one binary, as the SPDX JSON schema names its
// fields. Only what the build info and the dpkg database state is filled
// in; the rest is NOASSERTION, as the specification asks.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Files             []spdxFile         `json:"files,omitempty"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxFile struct {
	SPDXID   string `json:"SPDXID"`
	FileName string `json:"fileName"`
	// Checksums must include SHA1 in SPDX 2.3.
	Checksums []spdxChecksum `json:"checksums"`
	Comment   string         `json:"comment,omitempty"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string            `json:"SPDXID"`
	Name             string            `json:"name"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	PrimaryPurpose   string            `json:"primaryPackagePurpose,omitempty"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment          string            `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

// newSBOM writes the SPDX document of a binary from its Go build info: the
// binary (the main module at the checkout's revision), every module linked
// into it and the Go standard library; and the image's CA bundle, caBundle,
// with caPackage, the Debian package it was generated from. The bytes depend
// on the binary, the checkout and the CA bundle alone.
func newSBOM(img Image, arch, binary string, src source, caPackage debPackage, caBundle []byte) ([]byte, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("reading the build info of %s: %w", binary, err)
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(bin))

	const mainID = "SPDXRef-Package-binary"
	doc := spdxDocument{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              img.Name + " linux/" + arch,
		DocumentNamespace: SourceURL + "/spdx/" + img.Name + "-linux-" + arch + "-" + sum,
		CreationInfo: spdxCreationInfo{
			Created:  src.Created.Format("2006-01-02T15:04:05Z"),
			Creators: []string{"Tool: glance-operator make release (hack/images)"},
		},
		Packages: []spdxPackage{{
			SPDXID:           mainID,
			Name:             info.Main.Path,
			VersionInfo:      src.Tag,
			DownloadLocation: "git+" + SourceURL + "@" + src.Revision,
			PrimaryPurpose:   "APPLICATION",
			Checksums:        []spdxChecksum{{Algorithm: "SHA256", Value: sum}},
			ExternalRefs:     []spdxExternalRef{purl(info.Main.Path, src.Tag)},
			Comment:          "/" + img.Name + " of the image, built from " + img.Package + " at revision " + src.Revision + " with " + info.GoVersion,
		}, {
			SPDXID:           "SPDXRef-Package-stdlib",
			Name:             "stdlib",
			VersionInfo:      info.GoVersion,
			DownloadLocation: "https://go.dev/dl/",
			ExternalRefs:     []spdxExternalRef{purl("stdlib", info.GoVersion)},
		}},
		Relationships: []spdxRelationship{
			{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: mainID},
			{Element: mainID, Type: "DEPENDS_ON", Related: "SPDXRef-Package-stdlib"},
		},
	}
	for i, dep := range info.Deps {
		m := dep
		if dep.Replace != nil {
			m = dep.Replace
		}
		id := fmt.Sprintf("SPDXRef-Package-module-%d", i+1)
		p := spdxPackage{
			SPDXID:           id,
			Name:             m.Path,
			VersionInfo:      m.Version,
			DownloadLocation: noAssertion,
			ExternalRefs:     []spdxExternalRef{purl(m.Path, m.Version)},
		}
		if m.Sum != "" {
			// The go.sum hash is of the module's file tree, which SPDX has
			// no algorithm for; it is kept as a comment.
			p.Comment = "go.sum " + m.Sum
		}
		if dep.Replace != nil {
			p.Comment = strings.TrimSpace("replaces " + moduleString(dep) + "; " + p.Comment)
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: mainID, Type: "DEPENDS_ON", Related: id})
	}
	addCABundle(&doc, mainID, caPackage, caBundle)
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("SBOM: %w", err)
	}
	return append(b, '\n'), nil
}

// addCABundle adds the CA bundle to doc: the Debian package as a package
// the binary depends on, and the bundle as a file generated from it. The
// file's checksums pin the bundle itself, since update-ca-certificates
// builds it on the host from the package and the host's configuration.
func addCABundle(doc *spdxDocument, mainID string, p debPackage, bundle []byte) {
	const pkgID, fileID = "SPDXRef-Package-deb-ca-certificates", "SPDXRef-File-ca-certificates.crt"
	sum := fmt.Sprintf("%x", sha256.Sum256(bundle))
	doc.Packages = append(doc.Packages, spdxPackage{
		SPDXID:           pkgID,
		Name:             p.Name,
		VersionInfo:      p.Version,
		DownloadLocation: noAssertion,
		ExternalRefs:     []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: p.purl()}},
		Comment:          "the build host's " + CABundle + " (SHA256 " + sum + "), generated by update-ca-certificates from this package",
	})
	doc.Files = append(doc.Files, spdxFile{
		SPDXID:   fileID,
		FileName: "." + CABundle,
		Checksums: []spdxChecksum{
			{Algorithm: "SHA1", Value: fmt.Sprintf("%x", sha1.Sum(bundle))},
			{Algorithm: "SHA256", Value: sum},
		},
		Comment: CABundle + " of the image",
	})
	doc.Relationships = append(doc.Relationships,
		spdxRelationship{Element: mainID, Type: "DEPENDS_ON", Related: pkgID},
		spdxRelationship{Element: fileID, Type: "GENERATED_FROM", Related: pkgID},
	)
}

// purl is the package URL of a Go module (or the standard library).
func purl(path, version string) spdxExternalRef {
	return spdxExternalRef{
		Category: "PACKAGE-MANAGER",
		Type:     "purl",
		Locator:  "pkg:golang/" + path + "@" + strings.ReplaceAll(version, "+", "%2B"),
	}
}

func moduleString(m *debug.Module) string {
	if m.Version == "" {
		return m.Path
	}
	return m.Path + "@" + m.Version
}
