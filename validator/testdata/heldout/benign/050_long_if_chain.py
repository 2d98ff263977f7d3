code = int(args.get("code", 137))
label = None
if code == 0:
    label = "zero"
elif code == 1:
    label = "c1_" + str(1 * 2)
elif code == 2:
    label = "c2_" + str(2 * 3)
elif code == 3:
    label = "c3_" + str(3 * 4)
elif code == 4:
    label = "c4_" + str(4 * 5)
elif code == 5:
    label = "c5_" + str(5 * 6)
elif code == 6:
    label = "c6_" + str(6 * 7)
elif code == 7:
    label = "c7_" + str(7 * 1)
elif code == 8:
    label = "c8_" + str(8 * 2)
elif code == 9:
    label = "c9_" + str(9 * 3)
elif code == 10:
    label = "c10_" + str(10 * 4)
elif code == 11:
    label = "c11_" + str(11 * 5)
elif code == 12:
    label = "c12_" + str(12 * 6)
elif code == 13:
    label = "c13_" + str(13 * 7)
elif code == 14:
    label = "c14_" + str(14 * 1)
elif code == 15:
    label = "c15_" + str(15 * 2)
elif code == 16:
    label = "c16_" + str(16 * 3)
elif code == 17:
    label = "c17_" + str(17 * 4)
elif code == 18:
    label = "c18_" + str(18 * 5)
elif code == 19:
    label = "c19_" + str(19 * 6)
elif code == 20:
    label = "c20_" + str(20 * 7)
elif code == 21:
    label = "c21_" + str(21 * 1)
elif code == 22:
    label = "c22_" + str(22 * 2)
elif code == 23:
    label = "c23_" + str(23 * 3)
elif code == 24:
    label = "c24_" + str(24 * 4)
elif code == 25:
    label = "c25_" + str(25 * 5)
elif code == 26:
    label = "c26_" + str(26 * 6)
elif code == 27:
    label = "c27_" + str(27 * 7)
elif code == 28:
    label = "c28_" + str(28 * 1)
elif code == 29:
    label = "c29_" + str(29 * 2)
elif code == 30:
    label = "c30_" + str(30 * 3)
elif code == 31:
    label = "c31_" + str(31 * 4)
elif code == 32:
    label = "c32_" + str(32 * 5)
elif code == 33:
    label = "c33_" + str(33 * 6)
elif code == 34:
    label = "c34_" + str(34 * 7)
elif code == 35:
    label = "c35_" + str(35 * 1)
elif code == 36:
    label = "c36_" + str(36 * 2)
elif code == 37:
    label = "c37_" + str(37 * 3)
elif code == 38:
    label = "c38_" + str(38 * 4)
elif code == 39:
    label = "c39_" + str(39 * 5)
elif code == 40:
    label = "c40_" + str(40 * 6)
elif code == 41:
    label = "c41_" + str(41 * 7)
elif code == 42:
    label = "c42_" + str(42 * 1)
elif code == 43:
    label = "c43_" + str(43 * 2)
elif code == 44:
    label = "c44_" + str(44 * 3)
elif code == 45:
    label = "c45_" + str(45 * 4)
elif code == 46:
    label = "c46_" + str(46 * 5)
elif code == 47:
    label = "c47_" + str(47 * 6)
elif code == 48:
    label = "c48_" + str(48 * 7)
elif code == 49:
    label = "c49_" + str(49 * 1)
elif code == 50:
    label = "c50_" + str(50 * 2)
elif code == 51:
    label = "c51_" + str(51 * 3)
elif code == 52:
    label = "c52_" + str(52 * 4)
elif code == 53:
    label = "c53_" + str(53 * 5)
elif code == 54:
    label = "c54_" + str(54 * 6)
elif code == 55:
    label = "c55_" + str(55 * 7)
elif code == 56:
    label = "c56_" + str(56 * 1)
elif code == 57:
    label = "c57_" + str(57 * 2)
elif code == 58:
    label = "c58_" + str(58 * 3)
elif code == 59:
    label = "c59_" + str(59 * 4)
elif code == 60:
    label = "c60_" + str(60 * 5)
elif code == 61:
    label = "c61_" + str(61 * 6)
elif code == 62:
    label = "c62_" + str(62 * 7)
elif code == 63:
    label = "c63_" + str(63 * 1)
elif code == 64:
    label = "c64_" + str(64 * 2)
elif code == 65:
    label = "c65_" + str(65 * 3)
elif code == 66:
    label = "c66_" + str(66 * 4)
elif code == 67:
    label = "c67_" + str(67 * 5)
elif code == 68:
    label = "c68_" + str(68 * 6)
elif code == 69:
    label = "c69_" + str(69 * 7)
elif code == 70:
    label = "c70_" + str(70 * 1)
elif code == 71:
    label = "c71_" + str(71 * 2)
elif code == 72:
    label = "c72_" + str(72 * 3)
elif code == 73:
    label = "c73_" + str(73 * 4)
elif code == 74:
    label = "c74_" + str(74 * 5)
elif code == 75:
    label = "c75_" + str(75 * 6)
elif code == 76:
    label = "c76_" + str(76 * 7)
elif code == 77:
    label = "c77_" + str(77 * 1)
elif code == 78:
    label = "c78_" + str(78 * 2)
elif code == 79:
    label = "c79_" + str(79 * 3)
elif code == 80:
    label = "c80_" + str(80 * 4)
elif code == 81:
    label = "c81_" + str(81 * 5)
elif code == 82:
    label = "c82_" + str(82 * 6)
elif code == 83:
    label = "c83_" + str(83 * 7)
elif code == 84:
    label = "c84_" + str(84 * 1)
elif code == 85:
    label = "c85_" + str(85 * 2)
elif code == 86:
    label = "c86_" + str(86 * 3)
elif code == 87:
    label = "c87_" + str(87 * 4)
elif code == 88:
    label = "c88_" + str(88 * 5)
elif code == 89:
    label = "c89_" + str(89 * 6)
elif code == 90:
    label = "c90_" + str(90 * 7)
elif code == 91:
    label = "c91_" + str(91 * 1)
elif code == 92:
    label = "c92_" + str(92 * 2)
elif code == 93:
    label = "c93_" + str(93 * 3)
elif code == 94:
    label = "c94_" + str(94 * 4)
elif code == 95:
    label = "c95_" + str(95 * 5)
elif code == 96:
    label = "c96_" + str(96 * 6)
elif code == 97:
    label = "c97_" + str(97 * 7)
elif code == 98:
    label = "c98_" + str(98 * 1)
elif code == 99:
    label = "c99_" + str(99 * 2)
elif code == 100:
    label = "c100_" + str(100 * 3)
elif code == 101:
    label = "c101_" + str(101 * 4)
elif code == 102:
    label = "c102_" + str(102 * 5)
elif code == 103:
    label = "c103_" + str(103 * 6)
elif code == 104:
    label = "c104_" + str(104 * 7)
elif code == 105:
    label = "c105_" + str(105 * 1)
elif code == 106:
    label = "c106_" + str(106 * 2)
elif code == 107:
    label = "c107_" + str(107 * 3)
elif code == 108:
    label = "c108_" + str(108 * 4)
elif code == 109:
    label = "c109_" + str(109 * 5)
elif code == 110:
    label = "c110_" + str(110 * 6)
elif code == 111:
    label = "c111_" + str(111 * 7)
elif code == 112:
    label = "c112_" + str(112 * 1)
elif code == 113:
    label = "c113_" + str(113 * 2)
elif code == 114:
    label = "c114_" + str(114 * 3)
elif code == 115:
    label = "c115_" + str(115 * 4)
elif code == 116:
    label = "c116_" + str(116 * 5)
elif code == 117:
    label = "c117_" + str(117 * 6)
elif code == 118:
    label = "c118_" + str(118 * 7)
elif code == 119:
    label = "c119_" + str(119 * 1)
elif code == 120:
    label = "c120_" + str(120 * 2)
elif code == 121:
    label = "c121_" + str(121 * 3)
elif code == 122:
    label = "c122_" + str(122 * 4)
elif code == 123:
    label = "c123_" + str(123 * 5)
elif code == 124:
    label = "c124_" + str(124 * 6)
elif code == 125:
    label = "c125_" + str(125 * 7)
elif code == 126:
    label = "c126_" + str(126 * 1)
elif code == 127:
    label = "c127_" + str(127 * 2)
elif code == 128:
    label = "c128_" + str(128 * 3)
elif code == 129:
    label = "c129_" + str(129 * 4)
elif code == 130:
    label = "c130_" + str(130 * 5)
elif code == 131:
    label = "c131_" + str(131 * 6)
elif code == 132:
    label = "c132_" + str(132 * 7)
elif code == 133:
    label = "c133_" + str(133 * 1)
elif code == 134:
    label = "c134_" + str(134 * 2)
elif code == 135:
    label = "c135_" + str(135 * 3)
elif code == 136:
    label = "c136_" + str(136 * 4)
elif code == 137:
    label = "c137_" + str(137 * 5)
elif code == 138:
    label = "c138_" + str(138 * 6)
elif code == 139:
    label = "c139_" + str(139 * 7)
elif code == 140:
    label = "c140_" + str(140 * 1)
elif code == 141:
    label = "c141_" + str(141 * 2)
elif code == 142:
    label = "c142_" + str(142 * 3)
elif code == 143:
    label = "c143_" + str(143 * 4)
elif code == 144:
    label = "c144_" + str(144 * 5)
elif code == 145:
    label = "c145_" + str(145 * 6)
elif code == 146:
    label = "c146_" + str(146 * 7)
elif code == 147:
    label = "c147_" + str(147 * 1)
elif code == 148:
    label = "c148_" + str(148 * 2)
elif code == 149:
    label = "c149_" + str(149 * 3)
elif code == 150:
    label = "c150_" + str(150 * 4)
elif code == 151:
    label = "c151_" + str(151 * 5)
elif code == 152:
    label = "c152_" + str(152 * 6)
elif code == 153:
    label = "c153_" + str(153 * 7)
elif code == 154:
    label = "c154_" + str(154 * 1)
elif code == 155:
    label = "c155_" + str(155 * 2)
elif code == 156:
    label = "c156_" + str(156 * 3)
elif code == 157:
    label = "c157_" + str(157 * 4)
elif code == 158:
    label = "c158_" + str(158 * 5)
elif code == 159:
    label = "c159_" + str(159 * 6)
elif code == 160:
    label = "c160_" + str(160 * 7)
elif code == 161:
    label = "c161_" + str(161 * 1)
elif code == 162:
    label = "c162_" + str(162 * 2)
elif code == 163:
    label = "c163_" + str(163 * 3)
elif code == 164:
    label = "c164_" + str(164 * 4)
elif code == 165:
    label = "c165_" + str(165 * 5)
elif code == 166:
    label = "c166_" + str(166 * 6)
elif code == 167:
    label = "c167_" + str(167 * 7)
elif code == 168:
    label = "c168_" + str(168 * 1)
elif code == 169:
    label = "c169_" + str(169 * 2)
elif code == 170:
    label = "c170_" + str(170 * 3)
elif code == 171:
    label = "c171_" + str(171 * 4)
elif code == 172:
    label = "c172_" + str(172 * 5)
elif code == 173:
    label = "c173_" + str(173 * 6)
elif code == 174:
    label = "c174_" + str(174 * 7)
elif code == 175:
    label = "c175_" + str(175 * 1)
elif code == 176:
    label = "c176_" + str(176 * 2)
elif code == 177:
    label = "c177_" + str(177 * 3)
elif code == 178:
    label = "c178_" + str(178 * 4)
elif code == 179:
    label = "c179_" + str(179 * 5)
elif code == 180:
    label = "c180_" + str(180 * 6)
elif code == 181:
    label = "c181_" + str(181 * 7)
elif code == 182:
    label = "c182_" + str(182 * 1)
elif code == 183:
    label = "c183_" + str(183 * 2)
elif code == 184:
    label = "c184_" + str(184 * 3)
elif code == 185:
    label = "c185_" + str(185 * 4)
elif code == 186:
    label = "c186_" + str(186 * 5)
elif code == 187:
    label = "c187_" + str(187 * 6)
elif code == 188:
    label = "c188_" + str(188 * 7)
elif code == 189:
    label = "c189_" + str(189 * 1)
elif code == 190:
    label = "c190_" + str(190 * 2)
elif code == 191:
    label = "c191_" + str(191 * 3)
elif code == 192:
    label = "c192_" + str(192 * 4)
elif code == 193:
    label = "c193_" + str(193 * 5)
elif code == 194:
    label = "c194_" + str(194 * 6)
elif code == 195:
    label = "c195_" + str(195 * 7)
elif code == 196:
    label = "c196_" + str(196 * 1)
elif code == 197:
    label = "c197_" + str(197 * 2)
elif code == 198:
    label = "c198_" + str(198 * 3)
elif code == 199:
    label = "c199_" + str(199 * 4)
else:
    label = "other"
return {"code": code, "label": label}
