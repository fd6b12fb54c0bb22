"""Test certificates made with the `openssl` command at test time, into a
test's own temporary directory (keys are never committed)."""
import os
import subprocess


def _openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {r.stderr}")
    return r.stdout


class CertFactory:
    """A CA in `directory` that signs server and client certificates."""

    def __init__(self, directory, ca_name="ca"):
        self.dir = directory
        self.ca_name = ca_name
        self.ca_pem = os.path.join(directory, ca_name + ".pem")
        self.ca_key = os.path.join(directory, ca_name + ".key")
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", self.ca_key, "-out", self.ca_pem,
                 "-days", "2", "-subj", f"/CN=Magnetar test CA {ca_name}", cwd=directory)

    def issue(self, name, cn, serial, server=True):
        """Writes <name>.pem and <name>.key signed by this CA with `serial`
        (an int); a server certificate names localhost and 127.0.0.1.
        Returns (cert path, key path)."""
        key = os.path.join(self.dir, name + ".key")
        csr = os.path.join(self.dir, name + ".csr")
        pem = os.path.join(self.dir, name + ".pem")
        ext = os.path.join(self.dir, name + ".ext")
        with open(ext, "w") as f:
            if server:
                f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
            else:
                f.write("extendedKeyUsage=clientAuth\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", f"/CN={cn}", cwd=self.dir)
        _openssl("x509", "-req", "-in", csr, "-CA", self.ca_pem, "-CAkey", self.ca_key, "-set_serial", str(serial),
                 "-out", pem, "-days", "2", "-extfile", ext, cwd=self.dir)
        return pem, key


def serial_of_der(der, cwd):
    """The serial number (int) of a DER certificate."""
    r = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"], input=der, cwd=cwd,
                       capture_output=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.decode())
    return int(r.stdout.decode().strip().split("=", 1)[1], 16)
