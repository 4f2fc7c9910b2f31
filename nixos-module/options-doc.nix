# Renders the options of services.nico as Markdown, with nixpkgs' lib only
# (the same option list nixosOptionsDoc starts from), so docs/options.md can
# be regenerated and checked for drift on machines without nixpkgs:
# `make nix-docs`, `make nix-check`.
{ lib, options }:

let
  render = v:
    if v ? _type && v._type == "literalExpression" then v.text
    else if v ? _type && v._type == "literalMD" then v.text
    else lib.generators.toPretty { } v;

  block = title: v: "\n*${title}:*\n\n```nix\n${render v}\n```\n";

  option = o: ''
    ## `${o.name}`

    ${lib.removeSuffix "\n" (lib.concatStringsSep "\n" (map lib.trim (lib.splitString "\n" (lib.trim o.description or ""))))}

    *Type:* ${o.type}
  '' + lib.optionalString (o ? default) (block "Default" o.default)
     + lib.optionalString (o ? example) (block "Example" o.example);

  visible = lib.filter (o: o.visible && !o.internal) (lib.optionAttrSetToDocList options);
in
''
  # services.nico options

  Generated from `nixos-module/` by `make nix-docs`; `make nix-check` and
  `nix flake check` fail when this file is out of date.

'' + lib.concatMapStringsSep "\n" option visible
