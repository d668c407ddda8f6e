"""Texts of each kind the count_tokens estimate must handle, generated from a seed (no large files).

Common English words in sentences, Python and JavaScript built from templates,
Chinese from common words, Japanese from common phrases, tool definitions with
JSON schemas, Markdown documents, and PDFs written here with their text in
FlateDecode content streams (how most PDF writers store a page).
"""

from __future__ import annotations

import random
import zlib
from typing import Any

WORDS = ("the of and to in is that it for was on are as with his they be at one have this from or had by "
         "word but what some we can out other were all there when up use your how said an each she which do "
         "their time if will way about many then them write would like so these her long make thing see him "
         "two has look more day could go come did number sound no most people my over know water than call "
         "first who may down side been now find any new work part take get place made live where after back "
         "little only round man year came show every good me give our under name very through just form "
         "sentence great think say help low line differ turn cause much mean before move right boy old too "
         "same tell does set three want air well also play small end put home read hand port large spell add "
         "even land here must big high such follow act why ask men change went light kind off need house "
         "picture try us again animal point mother world near build self earth father head stand own page "
         "should country found answer school grow study still learn plant cover food sun four between state "
         "keep eye never last let thought city tree cross farm hard start might story saw far sea draw left "
         "late run while press close night real life few north open seem together next white children begin "
         "government development information environment responsibility particularly understanding "
         "international significantly approximately infrastructure organization relationship").split()


def prose(rng: random.Random, n_sentences: int) -> str:
    out = []
    for i in range(n_sentences):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 22))]
        if rng.random() < 0.3:
            words.insert(rng.randint(1, len(words) - 1), str(rng.randint(2, 2025)))
        if rng.random() < 0.4:
            k = rng.randint(2, len(words) - 2)
            words[k] += ","
        s = " ".join(words)
        s = s[0].upper() + s[1:] + rng.choice(".....?!")
        out.append(s)
        if rng.random() < 0.15:
            out.append("\n\n")
    return " ".join(out).replace(" \n\n ", "\n\n")


def code(rng: random.Random, n_funcs: int) -> str:
    out = ["import os\nimport json\nfrom typing import Any\n\n"]
    for i in range(n_funcs):
        a, b, c = (rng.choice(WORDS[:150]) for _ in range(3))
        name = f"{a}_{b}_{i}"
        arg = f"{c}_items"
        body = [
            f"def {name}({arg}: list[dict[str, Any]], limit: int = {rng.randint(1, 100)}) -> dict[str, int]:",
            f'    """Return the {a} {b} counts for each {c}."""',
            "    result: dict[str, int] = {}",
            f"    for index, item in enumerate({arg}):",
            "        if index >= limit:",
            "            break",
            f'        key = item.get("{a}", "{b}")',
            f"        result[key] = result.get(key, 0) + len(item) * {rng.randint(2, 9)}",
            f'    if not result:\n        raise ValueError(f"no {c} found in {{len({arg})}} items")',
            "    return result\n\n",
        ]
        if rng.random() < 0.5:
            cls = a.capitalize() + b.capitalize()
            body += [f"class {cls}Handler:",
                     f"    def __init__(self, path: str) -> None:",
                     f"        self.path = os.path.join(path, \"{c}.json\")",
                     f"        self.cache = {{}}",
                     "",
                     f"    def load(self) -> Any:",
                     f"        with open(self.path) as fh:",
                     f"            return json.load(fh)\n\n"]
        out.append("\n".join(body))
    return "\n".join(out)


def js_code(rng: random.Random, n: int) -> str:
    out = []
    for i in range(n):
        a, b = (rng.choice(WORDS[:150]) for _ in range(2))
        fn = a + b.capitalize() + str(i)
        out.append(
            f"export async function {fn}(options = {{}}) {{\n"
            f"  const {{ {a}, {b} = {rng.randint(0, 50)} }} = options;\n"
            f"  const response = await fetch(`/api/{a}/${{{b}}}`, {{ method: 'POST' }});\n"
            f"  if (!response.ok) {{\n    throw new Error(`failed: ${{response.status}}`);\n  }}\n"
            f"  return (await response.json()).items.map((x) => x.{a} ?? null);\n}}\n")
    return "\n".join(out)


CJK_WORDS = ("我们 你们 他们 今天 明天 时间 问题 工作 学习 中国 世界 国家 人民 发展 经济 社会 政府 文化 教育 科学 技术 "
             "研究 方法 系统 数据 信息 网络 公司 市场 服务 管理 生活 朋友 老师 学生 孩子 家庭 城市 地方 环境 历史 "
             "重要 需要 可以 应该 已经 还是 因为 所以 但是 如果 虽然 而且 这个 那个 什么 怎么 为什么 一个 没有 "
             "知道 认为 觉得 希望 开始 继续 完成 提高 解决 使用 进行 参加 成为 表示 告诉 看到 听到 说话 写字 "
             "电脑 手机 程序 代码 文件 用户 模型 语言 计算 结果").split()


def chinese(rng: random.Random, n_sentences: int) -> str:
    out = []
    for _ in range(n_sentences):
        parts = ["".join(rng.choice(CJK_WORDS) for _ in range(rng.randint(2, 5))) for _ in range(rng.randint(1, 3))]
        out.append("，".join(parts) + rng.choice("。。。？！"))
    return "".join(out)


JA = ("私たちは 今日 東京で 会議が あります。 このプログラムは データを 処理して 結果を 返します。 "
      "天気が よければ 公園に 行きましょう。 日本語の 文章を 書くのは 難しいですが、 楽しいです。 "
      "システムの 設定を 変更して ください。 エラーが 発生した 場合は、 ログを 確認して ください。").split()


def japanese(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(JA) for _ in range(n))


def tool_schemas(rng: random.Random, n_tools: int) -> list[dict[str, Any]]:
    tools = []
    for i in range(n_tools):
        props: dict[str, Any] = {}
        for j in range(rng.randint(2, 7)):
            pname = f"{rng.choice(WORDS[:150])}_{rng.choice(WORDS[:150])}"
            kind = rng.choice(["string", "integer", "boolean", "array", "enum"])
            desc = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14))).capitalize() + "."
            if kind == "enum":
                props[pname] = {"type": "string", "enum": [rng.choice(WORDS[:100]) for _ in range(rng.randint(2, 5))],
                                "description": desc}
            elif kind == "array":
                props[pname] = {"type": "array", "items": {"type": "string"}, "description": desc}
            else:
                props[pname] = {"type": kind, "description": desc}
        tools.append({
            "name": f"{rng.choice(WORDS[:150])}_{rng.choice(WORDS[:150])}_{i}",
            "description": prose(rng, rng.randint(1, 4)),
            "input_schema": {"type": "object", "properties": props,
                             "required": list(props)[: rng.randint(1, len(props))],
                             "additionalProperties": False},
        })
    return tools


def document(rng: random.Random, n_sections: int) -> str:
    out = ["# Operations handbook\n"]
    for i in range(n_sections):
        out.append(f"\n## {i + 1}. {' '.join(rng.choice(WORDS) for _ in range(3)).title()}\n\n")
        out.append(prose(rng, rng.randint(3, 8)))
        out.append("\n\n")
        for k in range(rng.randint(0, 4)):
            out.append(f"- {' '.join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))}: {rng.randint(1, 999)}\n")
        if rng.random() < 0.3:
            out.append("\n| name | value | unit |\n|---|---|---|\n")
            for k in range(3):
                out.append(f"| {rng.choice(WORDS)} | {rng.randint(1, 9999)} | ms |\n")
    return "".join(out)


def pdf(pages: list[list[str]], kerned: bool = False) -> bytes:
    """A PDF whose pages show these lines in Helvetica; ``kerned`` writes them as TJ arrays with
    kerning inside words and word gaps as shifts, the way typesetting programs do.

    Objects: 1 catalog, 2 page tree, 3 font, then per page its content stream and the page."""

    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"",
                            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for lines in pages:
        ops = [b"BT /F1 11 Tf 72 720 Td 14 TL"]
        for line in lines:
            if kerned:
                words = [_escape(w[:2]) + b")15(" + _escape(w[2:]) for w in line.split(" ")]
                ops.append(b"[(" + b")-250(".join(words) + b")] TJ T*")
            else:
                ops.append(b"(" + _escape(line) + b") Tj T*")
        ops.append(b"ET")
        stream = zlib.compress(b"\n".join(ops))
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream")
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 3 0 R >> >> >>" % len(objects))
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % len(kids)
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _escape(text: str) -> bytes:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")
