// Package archtest holds no code, only tests of the code's layout: which
// packages a process links, how long a function may grow. They keep the
// rules that a review would otherwise have to remember.
package archtest
