package config

import yaml "go.yaml.in/yaml/v3"

// decodeAny is n.Decode into an any, mapping by mapping: yaml.v3 checks
// every key of a mapping against every other for duplicates, which at
// 10,000 machines is most of a second per decode, and dedupe has already
// refused the duplicates with their lines. A mapping whose keys are not
// all plain strings, or that merges another (<<), is left to yaml whole,
// as is every scalar, sequence and alias, so that what comes out is what
// yaml gives.
func decodeAny(n *yaml.Node) (any, error) {
	if n.Kind != yaml.MappingNode || !plainKeys(n) {
		var v any
		err := n.Decode(&v)
		return v, err
	}
	out := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		v, err := decodeAny(n.Content[i+1])
		if err != nil {
			return nil, err
		}
		out[n.Content[i].Value] = v
	}
	return out, nil
}

// plainKeys says whether every key of mapping n is a plain string: a
// scalar that yaml reads as a string, and not a merge.
func plainKeys(n *yaml.Node) bool {
	for i := 0; i < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return false
		}
	}
	return true
}
