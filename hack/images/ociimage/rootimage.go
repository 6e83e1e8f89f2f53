package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TreeImage is an image of directory trees, such as a Debian root and an
// overlay of files on it: one uncompressed layer per tree, lowest first.
// Owners, modes, symbolic and hard links are kept; device nodes, sockets
// and fifos are left out (the runtime provides /dev).
type TreeImage struct {
	Trees []Tree
	// Files, when set, are a last layer of files by path (relative, slash
	// separated), owned by root, with their parent directories.
	Files  map[string]TreeFile
	Config v1.Config
	// Comment describes the image in its history.
	Comment string
}

// Tree is one layer of TreeImage: the tree at Dir, less what Omit returns
// true for (paths relative to Dir, slash separated; an omitted directory
// is omitted whole). Two images with the same Tree share its layer.
type Tree struct {
	Dir  string
	Omit func(rel string) bool
}

// TreeFile is one file of TreeImage.Files.
type TreeFile struct {
	Data []byte
	Mode int64
}

// WriteTreeArchive writes img as an OCI layout archive at path, named ref,
// every timestamp set to created, and returns the manifest's digest. The
// same trees give the same digest.
func WriteTreeArchive(path, ref, arch string, img TreeImage, created time.Time) (v1.Hash, error) {
	layers := make([]layer, 0, len(img.Trees))
	for _, tree := range img.Trees {
		l, err := treeLayer(tree.Dir, tree.Omit, created)
		if err != nil {
			return v1.Hash{}, err
		}
		layers = append(layers, l)
	}
	if len(img.Files) > 0 {
		l, err := filesLayer(img.Files, created)
		if err != nil {
			return v1.Hash{}, err
		}
		layers = append(layers, l)
	}
	l, err := assemble(ref, arch, created, layers, img.Config, img.Comment)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := l.writeArchive(path, created); err != nil {
		return v1.Hash{}, err
	}
	return l.digest, nil
}

// treeLayer tars the tree at dir, in lexical order, uncompressed.
func treeLayer(dir string, omit func(string) bool, created time.Time) (layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// The first path of each inode with more than one link, for hard links.
	inodes := map[uint64]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		if omit != nil && omit(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		link := ""
		if mode&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		st, _ := info.Sys().(*syscall.Stat_t)
		if st != nil {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		}
		// Only what the tree holds: no names of this machine's users, no
		// access or change times.
		h.Uname, h.Gname = "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = created, time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		if mode.IsRegular() && st != nil && st.Nlink > 1 {
			if first, ok := inodes[st.Ino]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			} else {
				inodes[st.Ino] = h.Name
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return layer{}, fmt.Errorf("the layer of %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return layer{}, err
	}
	digest := v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sha256.Sum256(buf.Bytes()))}
	return layer{blob: buf.Bytes(), digest: digest, diffID: digest, mediaType: types.OCIUncompressedLayer}, nil
}

// filesLayer is an uncompressed layer of files and their parent
// directories.
func filesLayer(files map[string]TreeFile, created time.Time) (layer, error) {
	dirs := map[string]bool{}
	var entries []entry
	for name, f := range files {
		entries = append(entries, entry{name: name, mode: f.Mode, data: f.Data})
		for d := filepath.Dir(name); d != "." && d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			entries = append(entries, entry{name: d + "/", mode: 0o755})
		}
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, entries, created); err != nil {
		return layer{}, err
	}
	digest := v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sha256.Sum256(buf.Bytes()))}
	return layer{blob: buf.Bytes(), digest: digest, diffID: digest, mediaType: types.OCIUncompressedLayer}, nil
}
