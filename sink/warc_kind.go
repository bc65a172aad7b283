package sink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/drover-crawl/drover/sink/sinkuri"
)

// openWARC is Open of a warc:DIR URI.
func openWARC(_ context.Context, uri string, opts Options) (Sink, error) {
	w, err := sinkuri.ParseWARC(uri)
	if err != nil {
		return nil, err
	}
	return orNil(NewWARC(WARCConfig{Dir: w.Dir, Campaign: opts.Campaign, MaxFileSize: opts.WARCMaxFileSize, Captures: w.Captures}))
}

// checkWARC is Check of a warc:DIR URI: DIR, or its nearest existing
// parent, is a directory this process can create a file in.
func checkWARC(_ context.Context, uri string, _ Options) error {
	w, err := sinkuri.ParseWARC(uri)
	if err != nil {
		return err
	}
	p := filepath.Clean(w.Dir)
	for {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory; make warc:DIR a directory the workers can write, or pick another", p)
			}
			break
		}
		// A missing directory, or a file where a directory should be:
		// look further up.
		parent := filepath.Dir(p)
		if !(errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) || parent == p {
			return fmt.Errorf("%v; make warc:DIR a directory the workers can write, or pick another", err)
		}
		p = parent
	}
	f, err := os.CreateTemp(p, ".drover-check-*")
	if err != nil {
		return fmt.Errorf("cannot write in %s: %v; make it writable by the workers, or pick another warc:DIR", p, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
