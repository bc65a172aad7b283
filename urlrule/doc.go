// Package urlrule holds the crawler's pure rules about URLs: normalization
// and host keys (Normalize, HostKey), a campaign's scope and trap guards
// (Scope), and robots.txt (ParseRobots, RFC 9309). They do no I/O, so the
// fetcher (package fetch) and the scheduler (package frontier) share them
// without the scheduler linking the fetcher's HTTP and HTML machinery.
package urlrule
