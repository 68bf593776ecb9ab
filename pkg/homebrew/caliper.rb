# Homebrew formula for caliper. Not yet run on a Mac (docs/macos.md): CI
# checks its syntax only (ruby -c). homepage, url and sha256 are
# placeholders for where a release's tarball (`make dist`) is published.
class Caliper < Formula
  desc "Benchmarks LLM inference servers and records each number's protocol"
  homepage "https://github.com/caliper-bench/caliper"
  url "https://github.com/caliper-bench/caliper/releases/download/v0.1.0/caliper-0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"

  depends_on "pkgconf" => :build
  depends_on "curl"
  depends_on "jansson"
  depends_on "libmicrohttpd"
  depends_on "openblas"
  depends_on "openssl@3"
  depends_on "pcre2"
  depends_on "sqlite"
  depends_on "yajl"

  def install
    # The Makefile finds Homebrew's keg-only curl, sqlite and openblas
    # through `brew --prefix`; MPI stays off so the formula does not depend
    # on whether open-mpi happens to be installed.
    system "make", "WITH_MPI=no", "PREFIX=#{prefix}", "MANDIR=#{man}", "all"
    system "make", "WITH_MPI=no", "PREFIX=#{prefix}", "MANDIR=#{man}", "install"
  end

  test do
    assert_match "caliper #{version}", shell_output("#{bin}/caliper --version")
    (testpath/"units.c").write <<~C
      #include <caliper/units.h>
      #include <caliper/error.h>
      int main(void) {
        double v = 0;
        return cal_unit_parse(CAL_U_TIME, "250ms", NULL, &v) == CAL_OK && v == 0.25 ? 0 : 1;
      }
    C
    pkgconf = Formula["pkgconf"].opt_bin/"pkgconf"
    flags = shell_output("#{pkgconf} --cflags --libs caliper").split
    system ENV.cc, "-std=c11", "units.c", "-o", "units", *flags
    system "./units"
  end
end
