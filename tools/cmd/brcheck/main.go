// Command brcheck checks kvmd's Buildroot BR2_EXTERNAL tree statically
// (see package kvmd/tools/internal/brcheck): brcheck [-buildroot DIR] TREE.
// It prints one problem a line and exits 1 if there are any.
package main

import (
	"flag"
	"fmt"
	"os"

	"kvmd/tools/internal/brcheck"
)

func main() {
	br := flag.String("buildroot", "", "also check the defconfigs against the Buildroot source tree in `DIR`")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: brcheck [-buildroot DIR] BR2_EXTERNAL_TREE")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	problems, err := brcheck.Check(flag.Arg(0), *br)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	against := "without a Buildroot tree (-buildroot DIR checks the options too)"
	if *br != "" {
		against = "against " + *br
	}
	fmt.Printf("brcheck: %s is clean, checked %s\n", flag.Arg(0), against)
}
