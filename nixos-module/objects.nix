# services.nico.objects: the fleet's objects (the EtcdCluster, machine
# pools, Kubernetes clusters) declared in the flake, rendered to a
# manifest that nico-objects.service on each control-plane host applies
# (nico-agent apply-objects) when the agent starts and after every switch
# that changes it (docs/declared-objects.md).
#
# The options of each object's spec are made from lib/api-schema.json,
# which pkg/api/internal/apidocs generates from the Go types (`make
# api-docs`; TestNixSchemaUpToDate fails when the two drift apart): a
# field of the API is an option here, with the API's name, type and doc.
# The manifest is what `nicoctl apply -f` reads: JSON documents separated
# by ---, a FlakeObjects header first.
{ config, lib, pkgs, ... }:

let
  inherit (lib) mkOption mkIf mkMerge mkDefault types literalExpression;

  cfg = config.services.nico;
  ocfg = cfg.objects;
  isControlPlane = lib.elem "controlPlane" cfg.roles;
  schema = lib.importJSON ./lib/api-schema.json;

  duration = types.strMatching "([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+" // {
    description = "Go duration (such as \"30s\" or \"2m\")";
  };

  # typeOf is the option type of a schema node.
  typeOf = node:
    if node.type == "struct" then types.submodule { options = lib.mapAttrs (_: optionOf) node.fields; }
    else if node.type == "list" then types.listOf (typeOf node.of)
    else if node.type == "attrs" then types.attrsOf (typeOf node.of)
    else if node.type == "string" && node ? enum then types.enum node.enum
    else if node.type == "string" && (node.format or "") == "duration" then duration
    else if node.type == "string" then types.str
    else if node.type == "int" then types.int
    else if node.type == "float" then types.number
    else if node.type == "bool" then types.bool
    else types.anything;

  # optionOf is a field's option: null (a struct: empty) leaves the field
  # out of the manifest, and the API's default applies.
  optionOf = node: mkOption {
    type = if node.type == "struct" then typeOf node else types.nullOr (typeOf node);
    default = if node.type == "struct" then { } else null;
    description = node.description or "";
  };

  # clean drops the fields left null and the structs left empty.
  clean = v:
    if lib.isAttrs v then lib.filterAttrs (_: x: x != null && x != { }) (lib.mapAttrs (_: clean) v)
    else if lib.isList v then map clean v
    else v;

  group = "nico.homystack.io";
  doc = apiVersion: kind: name: spec: { inherit apiVersion kind; metadata.name = name; spec = clean spec; };
  documents =
    [ (doc "${group}/v1" "FlakeObjects" "flake" { inherit (ocfg) revision lastModified kubernetesClusterRemoval; }) ]
    ++ lib.optional (ocfg.etcdCluster != null) (doc "${group}/v1" "EtcdCluster" "etcd" ocfg.etcdCluster)
    ++ lib.mapAttrsToList (doc "${group}/v1" "MachinePool") ocfg.machinePools
    ++ lib.mapAttrsToList (doc "${group}/v1alpha1" "KubernetesCluster") ocfg.kubernetesClusters;
  manifest = pkgs.writeText "nico-objects.yaml" (lib.concatMapStringsSep "---\n" (d: builtins.toJSON d + "\n") documents);
  manifestLink = "/etc/nico/objects.yaml";

  dnsLabel = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?";
  clusterName = "[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?";
  badNames = re: attrs: lib.filter (n: builtins.match re n == null) (lib.attrNames attrs);
  opt = "services.nico.objects";
in
{
  options.services.nico.objects = {
    enable = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Declare the fleet's objects here: the agent on every control-plane
        host applies them (docs/declared-objects.md). Objects the flake
        declared and no longer does are deleted (a machine pool), released
        (the EtcdCluster) or handled by `kubernetesClusterRemoval` (a
        Kubernetes cluster). false leaves the objects as they are.
      '';
    };
    revision = mkOption {
      type = types.nullOr types.str;
      default = config.system.configurationRevision;
      defaultText = literalExpression "config.system.configurationRevision";
      example = literalExpression "self.rev or self.dirtyRev";
      description = "The flake's revision, recorded with the objects it declares.";
    };
    lastModified = mkOption {
      type = types.ints.unsigned;
      example = literalExpression "self.lastModified";
      description = ''
        The flake's commit time (Unix seconds). Hosts carry different
        generations during a rollout: the manifest that orders last (by
        this, then by `revision`) wins, and a host carrying an older one
        does not apply it.
      '';
    };
    kubernetesClusterRemoval = mkOption {
      type = types.enum [ "orphan" "delete" ];
      default = "orphan";
      description = ''
        What becomes of a Kubernetes cluster the flake no longer declares:
        `orphan` keeps it running, no longer the flake's; `delete` marks it
        for deletion, as `nicoctl delete cluster` does.
      '';
    };
    etcdCluster = mkOption {
      type = types.nullOr (typeOf schema.etcdCluster);
      default = null;
      visible = "shallow";
      example = literalExpression "{ voters = 3; version = \"3.6.16\"; policy.replaceDeadMembersAfter = \"10m\"; }";
      description = "The spec of the fleet's EtcdCluster: its fields are the API's (docs/api.md, EtcdCluster); null leaves it to nicoctl.";
    };
    machinePools = mkOption {
      type = types.attrsOf (typeOf schema.machinePool);
      default = { };
      visible = "shallow";
      example = literalExpression "{ web = { count = 3; template = { vcpus = 2; memoryMiB = 2048; diskGiB = 20; baseImage = \"nixos.qcow2\"; network = \"default\"; }; }; }";
      description = "Machine pools by name (a DNS label), each the spec of a MachinePool (docs/api.md).";
    };
    kubernetesClusters = mkOption {
      type = types.attrsOf (typeOf schema.kubernetesCluster);
      default = { };
      visible = "shallow";
      description = "Kubernetes clusters by name (1 to 40 lower-case letters, digits and '-'), each the spec of a KubernetesCluster (docs/api.md, docs/kubernetes-clusters.md).";
    };
    manifest = mkOption {
      type = types.package;
      readOnly = true;
      default = manifest;
      defaultText = literalExpression "the rendered manifest";
      description = "The manifest rendered from these options: what the agent applies, and what `nicoctl apply -f` reads.";
    };
  };

  config = mkIf (cfg.enable && ocfg.enable) (mkMerge [
    {
      assertions = [
        {
          assertion = ocfg.revision != null && ocfg.revision != "";
          message = "${opt}.revision is not set: give the flake's revision (self.rev or self.dirtyRev), or set system.configurationRevision.";
        }
        {
          assertion = badNames dnsLabel ocfg.machinePools == [ ];
          message = "${opt}.machinePools: the names ${builtins.toJSON (badNames dnsLabel ocfg.machinePools)} are not accepted; a pool's name is a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit).";
        }
        {
          assertion = badNames clusterName ocfg.kubernetesClusters == [ ];
          message = "${opt}.kubernetesClusters: the names ${builtins.toJSON (badNames clusterName ocfg.kubernetesClusters)} are not accepted; a cluster's name is 1 to 40 lower-case letters, digits and '-', starting and ending with a letter or digit.";
        }
        {
          assertion = ocfg.etcdCluster == null || lib.elem ocfg.etcdCluster.voters [ 1 3 5 7 ];
          message = "${opt}.etcdCluster.voters is ${builtins.toJSON (ocfg.etcdCluster.voters or null)}, not accepted: set it to 1, 3, 5 or 7.";
        }
      ] ++ lib.mapAttrsToList (name: p: {
        assertion = p.count == null || p.count >= 0;
        message = "${opt}.machinePools.${name}.count is ${toString p.count}, not accepted: 0 or more.";
      }) ocfg.machinePools;
    }
    (mkIf isControlPlane {
      environment.etc."nico/objects.yaml".source = manifest;
      services.nico.settings.objects.file = mkDefault manifestLink;
      # nico-objects applies the manifest once the agent is ready (the
      # agent's Wants; After), again when the agent starts again (PartOf)
      # and after every switch that changes the manifest (restartTriggers).
      # A refused manifest fails this unit, so the switch reports it
      # ("the following units failed"), and leaves the agent and its etcd
      # member running: a start of the agent that failed would stop the
      # member on every control-plane host switching into the same manifest.
      systemd.services.nico-agent.wants = [ "nico-objects.service" ];
      systemd.services.nico-objects = {
        description = "nico: apply the fleet's objects declared in the flake";
        after = [ "nico-agent.service" ];
        partOf = [ "nico-agent.service" ];
        restartTriggers = [ manifest ];
        serviceConfig = {
          Type = "oneshot";
          RemainAfterExit = true;
          ExecStart = "${cfg.package}/bin/nico-agent apply-objects --config /etc/nico/agent.yaml";
          User = "root";
          PrivateTmp = true;
          ProtectHome = "read-only";
          UMask = "0077";
        };
      };
    })
  ]);
}
