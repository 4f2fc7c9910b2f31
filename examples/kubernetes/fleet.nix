# What every machine of the fleet runs, in or out of the cluster: nico's
# agent, and your hardware configuration (fileSystems, boot.loader, ...).
# Replace the values below with your fleet's.
{
  services.nico = {
    enable = true;
    seeds = [ "10.0.0.1" ];
    tokenFile = "/run/keys/nico-token";
  };
}
