package crawllog

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// maxLine bounds one line read back; a longer one (or one cut by a full
// disk) counts as unreadable.
const maxLine = 1 << 20

// Files lists the crawl log files in dir (Dir of a run), sorted.
func Files(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*"+Ext))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	return files, nil
}

// ReadDir calls f with every line of every crawl log file in dir, file by
// file, and returns how many lines could not be read (not JSON); an error
// only when a file cannot be read at all.
func ReadDir(dir string, f func(Line)) (files []string, bad int, err error) {
	files, err = Files(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("crawl log %s: %w", dir, err)
	}
	for _, name := range files {
		n, err := readFile(name, f)
		if err != nil {
			return files, bad, err
		}
		bad += n
	}
	return files, bad, nil
}

func readFile(name string, f func(Line)) (bad int, err error) {
	file, err := os.Open(name)
	if err != nil {
		return 0, fmt.Errorf("crawl log: %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		var l Line
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			bad++
			continue
		}
		f(l)
	}
	if err := sc.Err(); err != nil {
		return bad, fmt.Errorf("crawl log %s: %w", name, err)
	}
	return bad, nil
}
