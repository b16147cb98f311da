package main

import (
	"archive/tar"
	"bufio"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
)

// entry is one file, directory or symlink of an image's file tree.
type entry struct {
	kind     byte // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	path     string
	target   string // a symlink's target
	mode     int64  // permission bits, setuid/setgid/sticky included
	uid, gid int
	body     []byte
}

// readRootfs reads a rootfs spec: one entry a line, fields separated by
// spaces, '#' starts a comment, paths are absolute in the image:
//
//	dir     /tmp            1777 0:0
//	file    /bin/busybox    0755 0:0 /usr/bin/busybox   (the last field: the source on this machine)
//	symlink /bin/sh         busybox
//
// Entries are written in the order given, so a directory comes before
// what it holds.
func readRootfs(spec string) ([]entry, error) {
	f, err := os.Open(spec)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var files []entry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		e, err := parseEntry(fields)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", spec, n, err)
		}
		files = append(files, e)
	}
	return files, sc.Err()
}

func parseEntry(fields []string) (entry, error) {
	want := map[string]int{"dir": 4, "file": 5, "symlink": 3}[fields[0]]
	if want == 0 || len(fields) != want {
		return entry{}, fmt.Errorf("want `dir PATH MODE UID:GID`, `file PATH MODE UID:GID SOURCE` or `symlink PATH TARGET`, got %q", strings.Join(fields, " "))
	}
	if !path.IsAbs(fields[1]) {
		return entry{}, fmt.Errorf("%s: the path in the image must be absolute", fields[1])
	}
	e := entry{path: strings.TrimPrefix(path.Clean(fields[1]), "/")}
	if fields[0] == "symlink" {
		e.kind, e.target, e.mode = tar.TypeSymlink, fields[2], 0o777
		return e, nil
	}
	mode, err := strconv.ParseInt(fields[2], 8, 64)
	if err != nil || mode > 0o7777 {
		return entry{}, fmt.Errorf("mode %q: want octal permission bits", fields[2])
	}
	uid, gid, ok := strings.Cut(fields[3], ":")
	if e.uid, err = strconv.Atoi(uid); err == nil && ok {
		e.gid, err = strconv.Atoi(gid)
	}
	if err != nil || !ok {
		return entry{}, fmt.Errorf("owner %q: want UID:GID", fields[3])
	}
	e.mode, e.kind = mode, tar.TypeDir
	if fields[0] == "file" {
		e.kind = tar.TypeReg
		if e.body, err = os.ReadFile(fields[4]); err != nil {
			return entry{}, err
		}
	}
	return e, nil
}
